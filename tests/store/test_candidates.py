"""Candidates: what storing a batch of failure reports does, and the pending counts per signal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragcanary.serve.intake.queue import query_key
from ragcanary.store.candidates import RECENT, CandidateStore, FailureReport
from ragcanary.store.errors import StorageUnavailable
from ragcanary.store.storage import Store

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _report(query: str, signal: str, seconds: int) -> FailureReport:
    at = T0 + timedelta(seconds=seconds)
    return FailureReport(query_key(query), query, signal, at, source=f"app-{seconds}")


def _by_query(found: CandidateStore) -> dict[str, dict[str, Any]]:
    return {row["query"]: row for row in found.list()}


def test_a_batch_merges_repeats_and_stored_questions_and_drops_the_oldest_past_the_cap(
    store: Store,
) -> None:
    """One batch holding a question twice, a question already stored, and one more than fits."""
    found = CandidateStore(store)
    found.add([_report("Reset password?", "thumbs_down", 0)], max_pending=100)
    found.add([_report("pricing", "other", 1)], max_pending=100)
    batch = [
        _report("sso login", "thumbs_down", 3),
        _report("RESET PASSWORD", "rephrased", 5),
        _report("SSO login!", "abandoned", 2),  # reported earlier than the first of the batch
        _report("export csv", "thumbs_down", 4),
        _report("sso  login", "thumbs_down", 6),
    ]
    added = found.add(batch, max_pending=3)
    assert (added.new, added.merged, added.dropped) == (2, 1, {"cap": 1})
    rows = _by_query(found)
    assert sorted(rows) == ["Reset password?", "export csv", "sso login"]  # pricing: the oldest
    sso = rows["sso login"]  # the query as first reported in the batch
    assert (sso["reports"], sso["signals"]) == (3, {"thumbs_down": 2, "abandoned": 1})
    assert (sso["first_at"], sso["last_at"]) == (
        T0 + timedelta(seconds=2),
        T0 + timedelta(seconds=6),
    )
    assert [r["source"] for r in sso["recent"]] == ["app-3", "app-2", "app-6"]
    reset = rows["Reset password?"]
    assert (reset["reports"], reset["signals"]) == (2, {"thumbs_down": 1, "rephrased": 1})
    assert (reset["first_at"], reset["last_at"]) == (T0, T0 + timedelta(seconds=5))
    assert [r["signal"] for r in reset["recent"]] == ["thumbs_down", "rephrased"]
    assert found.pending_by_signal() == {"thumbs_down": 3, "rephrased": 1, "abandoned": 1}


def test_merging_keeps_the_latest_report_time_and_only_the_last_reports_whole(
    store: Store,
) -> None:
    found = CandidateStore(store)
    found.add([_report("pricing", "other", 100)], max_pending=100)
    late = [_report("Pricing", "thumbs_down", second) for second in range(RECENT + 2)]
    added = found.add(late, max_pending=100)
    assert (added.new, added.merged, added.dropped) == (0, 1, {})
    (row,) = found.list()
    assert (row["reports"], row["signals"]) == (RECENT + 3, {"other": 1, "thumbs_down": RECENT + 2})
    assert (row["first_at"], row["last_at"]) == (T0 + timedelta(seconds=100),) * 2
    assert [r["source"] for r in row["recent"]] == [f"app-{s}" for s in range(2, RECENT + 2)]


def test_a_reviewed_question_reported_again_keeps_its_status_and_is_not_pending(
    store: Store,
) -> None:
    found = CandidateStore(store)
    found.add([_report("pricing", "other", 0), _report("sso", "abandoned", 1)], max_pending=100)
    dismissed = _by_query(found)["pricing"]["id"]
    assert found.close(dismissed, "dismissed", "not ours")
    added = found.add([_report("pricing", "thumbs_down", 2)], max_pending=1)
    assert (added.new, added.merged, added.dropped) == (0, 1, {})
    assert [r["query"] for r in found.list()] == ["sso"]
    (closed,) = found.list(status="dismissed")
    assert (closed["reports"], closed["signals"]) == (2, {"other": 1, "thumbs_down": 1})
    assert found.pending_by_signal() == {"abandoned": 1}


def test_pending_counts_each_candidate_once_per_signal_it_was_reported_with(
    store: Store,
) -> None:
    found = CandidateStore(store)
    assert found.pending_by_signal() == {}
    found.add([_report("pricing", "thumbs_down", s) for s in range(3)], max_pending=100)
    found.add([_report("sso", "thumbs_down", 4), _report("sso", "other", 5)], max_pending=100)
    assert found.pending_by_signal() == {"thumbs_down": 2, "other": 1}


def test_a_report_postgresql_cannot_hold_is_dropped_and_the_rest_of_its_batch_stored(
    postgres_url: str,
) -> None:
    """A NUL in text fails the whole batch's transaction on PostgreSQL, and so every later batch
    it was queued again with: it alone is dropped and counted, the others stored."""
    with Store.from_url(postgres_url) as store:
        store.migrate()
        found = CandidateStore(store)
        batch = [_report(f"question {i}", "other", i) for i in range(9)]
        batch.insert(6, _report("cut \x00 here", "other", 20))
        added = found.add(batch, max_pending=100)
        assert (added.new, added.dropped, added.unstored) == (9, {"unstorable": 1}, [])
        assert "NUL" in added.refusals[0]
        assert sorted(_by_query(found)) == sorted(f"question {i}" for i in range(9))


def test_half_a_surrogate_pair_is_dropped_and_the_rest_of_its_batch_stored(store: Store) -> None:
    """Neither driver can encode half a surrogate pair; it failed its batch (and escaped as a
    bare UnicodeEncodeError) on SQLite and PostgreSQL alike."""
    found = CandidateStore(store)
    half = FailureReport(query_key("smile"), "smile \ud83d", "other", T0)
    batch = [_report("question 0", "other", 0), half]
    batch += [_report("question 2", "other", 2), _report("question 0", "thumbs_down", 3)]
    added = found.add(batch, max_pending=100)
    assert (added.new, added.merged, added.dropped) == (2, 1, {"unstorable": 1})
    rows = _by_query(found)
    assert sorted(rows) == ["question 0", "question 2"]
    assert rows["question 0"]["signals"] == {"other": 1, "thumbs_down": 1}


def test_storage_down_before_a_batch_is_stored_raises_and_stores_nothing(tmp_path: Path) -> None:
    gone = f"sqlite:///{tmp_path / 'gone' / 'ragcanary.db'}"
    with Store.from_url(gone) as store, pytest.raises(StorageUnavailable):
        CandidateStore(store).add([_report("pricing", "other", 0)], max_pending=100)


def test_a_kept_report_with_half_a_surrogate_pair_reads_as_a_replacement_character(
    store: Store,
) -> None:
    """Older versions stored ``note`` and ``ids`` with half a pair; JSON and HTML cannot carry
    it, so every reader failed. It reads as U+FFFD, and a whole emoji stays whole."""
    found = CandidateStore(store)
    report = FailureReport(
        query_key("emoji"), "emoji", "other", T0, ids=("doc-\udc00",), note="cut \ud83d 😀"
    )
    found.add([report], max_pending=100)
    (row,) = found.list()
    assert row["recent"][0]["note"] == "cut \ufffd 😀"
    assert row["recent"][0]["ids"] == ["doc-\ufffd"]
    assert found.get(row["id"])["recent"] == row["recent"]  # type: ignore[index]
    assert found.pending_page(None, 10)[0][0]["recent"] == row["recent"]
