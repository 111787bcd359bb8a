"""Declared changes in the store: windows that end by finish or by their duration, and a
baseline pinned after a change only when asked, with the change as its reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import case_entry, run_report
from version6 import write_version6

from ragcanary.errors import UsageError
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import Maintenance
from ragcanary.store.change_records import ChangeRequest
from ragcanary.store.changes import ChangeStore
from ragcanary.store.migrations import UPGRADES, latest_version
from ragcanary.store.storage import Store

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
REINDEX = ChangeRequest("reindex", "rebuild the docs index", ("search",), 1800.0)


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_a_window_is_open_from_its_start_until_its_duration_runs_out(store: Store) -> None:
    changes = ChangeStore(store)
    change = changes.start(REINDEX, T0)
    assert change.ends_at == _at(30)
    assert [c.change_id for c in changes.open_at(_at(29.9))] == [change.change_id]
    assert changes.open_at(_at(30)) == []
    assert changes.open_at(T0 - timedelta(seconds=1)) == []
    assert changes.get(change.change_id) == change
    shown = changes.recent()[0].as_dict(_at(31))
    assert shown["state"] == "finished"
    assert shown["ended_by"] == "window"
    assert shown["finished_at"] == _at(30).isoformat()


def test_finish_closes_a_window_early_and_leaves_a_closed_one_as_it_was(store: Store) -> None:
    changes = ChangeStore(store)
    change = changes.start(REINDEX, T0)
    finished = changes.finish(change.change_id, _at(5))
    assert finished is not None
    assert finished.finished_at == _at(5)
    assert changes.open_at(_at(6)) == []
    again = changes.finish(change.change_id, _at(10))
    assert again is not None
    assert again.finished_at == _at(5)
    shown = again.as_dict(_at(10))
    assert (shown["state"], shown["ended_by"]) == ("finished", "finish")
    assert changes.finish("chg-nothing", _at(10)) is None


def test_changes_are_listed_newest_first(store: Store) -> None:
    changes = ChangeStore(store)
    first = changes.start(REINDEX, T0)
    second = changes.start(ChangeRequest("deploy", "v2", ("search", "other"), 600.0), _at(1))
    assert [c.change_id for c in changes.recent()] == [second.change_id, first.change_id]
    assert changes.recent()[0].targets == ("search", "other")
    assert [c.change_id for c in changes.open_at(_at(2))] == [
        second.change_id,
        first.change_id,
    ]


def _stored(store: Store, run_id: str, minutes: float, outcome: str = "ok") -> None:
    store.save_run(
        run_report(run_id, started_at=_at(minutes), outcome=outcome, cases=[case_entry("c1")])
    )


def test_baseline_accept_after_a_change_pins_the_first_good_run_after_it_with_the_reason(
    store: Store,
) -> None:
    changes = ChangeStore(store)
    _stored(store, "before", -5)
    store.set_baseline("core", "search", "before")
    change = changes.start(REINDEX, T0)
    _stored(store, "inside", 10)
    with pytest.raises(UsageError, match="still open"):
        changes.accept_baseline(change.change_id, "core", "search", _at(11))
    changes.finish(change.change_id, _at(12))
    with pytest.raises(UsageError, match="no run of suite 'core'"):
        changes.accept_baseline(change.change_id, "core", "search", _at(13))
    _stored(store, "after-bad", 14, outcome="regression")
    _stored(store, "after-good", 16)
    _stored(store, "later", 18)
    assert store.get_baseline("core", "search") == "before"  # the change pinned nothing
    pinned = changes.accept_baseline(change.change_id, "core", "search", _at(20))
    assert pinned == "after-good"
    (row,) = store.baselines()
    assert row["run_id"] == "after-good"
    assert (
        row["reason"]
        == f"accepted after change {change.change_id} (reindex: rebuild the docs index)"
    )
    store.set_baseline("core", "search", "later")  # a plain pin has no reason
    assert store.baselines()[0]["reason"] is None


def test_baseline_accept_names_a_target_the_change_did_not_touch(store: Store) -> None:
    changes = ChangeStore(store)
    change = changes.start(REINDEX, T0)
    with pytest.raises(UsageError, match="not target 'other'"):
        changes.accept_baseline(change.change_id, "core", "other", _at(40))
    with pytest.raises(UsageError, match="no change 'chg-x'"):
        changes.accept_baseline("chg-x", "core", "search", _at(40))


def test_a_run_made_inside_a_window_keeps_the_change_s_id_when_stored(store: Store) -> None:
    report = run_report(
        "inside", cases=[case_entry("c1")], maintenance={"change_id": "chg-1", "kind": "reindex"}
    )
    assert report.maintenance == Maintenance("chg-1", "reindex")
    store.save_run(report)
    stored = store.get_report("inside")
    assert stored is not None
    assert stored.maintenance == Maintenance("chg-1", "reindex")
    assert marshal(stored)["maintenance"] == {"change_id": "chg-1", "kind": "reindex"}


def test_upgrading_an_older_database_adds_the_changes_and_keeps_its_baselines(
    tmp_path: Path,
) -> None:
    """Version 9 adds the changes table and baselines.reason; pinned baselines stay."""
    url = f"sqlite:///{tmp_path / 'version6.db'}"
    write_version6(url, [run_report("r1", cases=[case_entry("c1")])], [("core", "search", "r1")])
    with Store.from_url(url) as upgraded:
        upgraded.migrate()
        assert upgraded.schema_version() == latest_version(UPGRADES)
        (row,) = upgraded.baselines()
        assert (row["run_id"], row["reason"]) == ("r1", None)
        change = ChangeStore(upgraded).start(REINDEX, T0)
        assert ChangeStore(upgraded).open_at(_at(1)) == [change]
