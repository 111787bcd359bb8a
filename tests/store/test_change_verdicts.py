"""Which run carries a change's verdict: the first of each pair after its window, once, judged
against the pair's last run before the change; and the verdicts read back per pair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from factories import case_entry, run_report

from ragcanary.store.change_records import ChangeRequest
from ragcanary.store.changes import ChangeStore
from ragcanary.store.storage import Store

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
REINDEX = ChangeRequest("reindex", "rebuild the docs index", ("search",), 1800.0)


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _stored(store: Store, run_id: str, minutes: float, outcome: str = "ok", **more: Any) -> None:
    store.save_run(
        run_report(
            run_id, started_at=_at(minutes), outcome=outcome, cases=[case_entry("c1")], **more
        )
    )


def test_the_first_run_after_the_window_is_due_and_no_later_one(store: Store) -> None:
    changes = ChangeStore(store)
    _stored(store, "old", -10)
    _stored(store, "before", -5, outcome="regression")
    change = changes.start(REINDEX, T0)
    _stored(store, "inside", 10)
    assert changes.due("core", "search", "inside2", _at(20)) is None  # still open
    changes.finish(change.change_id, _at(25))
    due = changes.due("core", "search", "first", _at(26))
    assert due is not None
    assert (due.change.change_id, due.before_run_id, due.before_outcome) == (
        change.change_id,
        "before",
        "regression",
    )
    assert changes.due("core", "search", "first", _at(25)) is not None  # at its very end
    assert changes.due("core", "other", "first", _at(26)) is None  # not its target
    _stored(store, "first", 26)
    assert changes.due("core", "search", "second", _at(27)) is None  # once per pair
    # Asked again for the same run (a retry of its write), it is still the first after.
    assert changes.due("core", "search", "first", _at(26)) is not None


def test_a_window_run_out_by_its_duration_is_due_like_a_finished_one(store: Store) -> None:
    changes = ChangeStore(store)
    _stored(store, "before", -1)
    change = changes.start(REINDEX, T0)
    assert changes.due("core", "search", "r", _at(29.9)) is None
    due = changes.due("core", "search", "r", _at(31))
    assert due is not None
    assert due.change.change_id == change.change_id


def test_a_pair_without_a_run_before_the_change_has_none_to_compare_with(store: Store) -> None:
    changes = ChangeStore(store)
    change = changes.start(REINDEX, T0)
    assert changes.due("core", "search", "first", _at(31)) is None  # never ran: nothing to say
    _stored(store, "inside", 5)
    due = changes.due("core", "search", "first", _at(31))
    assert due is not None
    assert (due.change.change_id, due.before_run_id) == (change.change_id, None)


def test_of_two_windows_closed_since_the_previous_run_the_last_closed_is_judged(
    store: Store,
) -> None:
    changes = ChangeStore(store)
    _stored(store, "before", -1)
    first = changes.start(REINDEX, T0)
    second = changes.start(ChangeRequest("deploy", "v2", ("search",), 600.0), _at(1))
    changes.finish(first.change_id, _at(20))
    due = changes.due("core", "search", "r", _at(21))
    assert due is not None
    assert due.change.change_id == first.change_id
    assert second.ended_at < first.ended_at


def test_verdicts_read_the_first_run_after_each_pair_s_window(store: Store) -> None:
    changes = ChangeStore(store)
    change = changes.start(REINDEX, T0)
    pairs = [("core", "search"), ("core", "other"), ("deep", "search")]
    (pending, other) = changes.verdicts(change, pairs, _at(1))  # open: none yet
    assert (pending.suite, pending.target, pending.run_id, pending.verdict) == (
        "core",
        "search",
        None,
        None,
    )
    assert other.as_dict()["verdict"] is None
    finished = changes.finish(change.change_id, _at(5))
    assert finished is not None
    carried = {
        "id": change.change_id,
        "kind": "reindex",
        "verdict": "regression",
        "before_run_id": "before",
        "diagnosis": {
            "cause": "index_lost",
            "summary": "3 ids left the index",
            "causes": [],
            "checked": {"index_lookup": True, "exact_search": False, "query_vectors": False},
            "lookup_s": None,
        },
        "reasons": ["hit_rate@5 0.91 → 0.62 against the last run before it"],
    }
    _stored(store, "after", 6, outcome="regression", change=carried)
    _stored(store, "later", 7)
    judged, waiting = changes.verdicts(finished, pairs, _at(8))
    assert judged.run_id == "after"
    assert judged.verdict is not None
    assert judged.verdict.verdict == "regression"
    assert judged.as_dict() == {
        "suite": "core",
        "target": "search",
        "run_id": "after",
        **{k: v for k, v in carried.items() if k not in ("id", "kind")},
    }
    assert (waiting.suite, waiting.run_id, waiting.verdict) == ("deep", None, None)
