"""The buffered writer: storage outages lose no run, and memory stays bounded."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy
from factories import case_entry, run_report
from sqlalchemy.pool import NullPool

from ragcanary.measure.run_report import RunReport
from ragcanary.store.buffer import BufferedWriter
from ragcanary.store.engine import make_engine
from ragcanary.store.errors import StorageError
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def report(run_id: str, minute: int = 0) -> RunReport:
    return run_report(
        run_id,
        started_at=NOW + timedelta(minutes=minute),
        metrics={"mrr": 1.0},
        cases=[case_entry("alpha", ids=["a"], scores=[0.9], metrics={"rr": 1.0})],
    )


class RecordingStore(Store):
    """A real store that also remembers the order in which runs reached the database."""

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        super().__init__(engine)
        self.saved: list[str] = []

    def save_run(self, report: RunReport) -> None:
        super().save_run(report)
        self.saved.append(report.run_id)


@dataclass
class Outage:
    """Takes the SQLite file's directory away, for real, and puts it back."""

    directory: Path

    def begin(self) -> None:
        self.directory.rename(self.directory.with_name("away"))

    def end(self) -> None:
        self.directory.with_name("away").rename(self.directory)


@pytest.fixture
def store(sqlite_url: str) -> Iterator[RecordingStore]:
    # Without a pool every call opens the file anew, so a vanished directory is noticed at
    # once (an open connection would keep writing to the moved file).
    with RecordingStore(make_engine(sqlite_url, poolclass=NullPool)) as store:
        store.migrate()
        yield store


@pytest.fixture
def outage(sqlite_url: str) -> Outage:
    database = sqlalchemy.make_url(sqlite_url).database
    assert database is not None
    return Outage(Path(database).parent)


def test_write_saves_at_once_while_storage_is_up(store: RecordingStore) -> None:
    """With storage up a report is saved by the call that writes it."""
    writer = BufferedWriter(store)
    assert writer.write(report("r1")) is True
    assert writer.pending == 0
    assert store.get_report("r1") == report("r1")


def test_runs_written_during_an_outage_are_saved_in_order_when_it_ends(
    store: RecordingStore, outage: Outage
) -> None:
    """Runs wait while the database is gone; the next write saves them first, oldest first."""
    writer = BufferedWriter(store)
    outage.begin()
    assert [writer.write(report(f"r{i}", i)) for i in (1, 2)] == [False, False]
    assert writer.pending == 2
    outage.end()
    assert writer.write(report("r3", 3)) is True
    assert writer.pending == 0
    assert store.saved == ["r1", "r2", "r3"]
    assert [r["run_id"] for r in store.list_runs()] == ["r3", "r2", "r1"]


def test_the_writer_keeps_why_storage_refused_the_last_save(
    store: RecordingStore, outage: Outage
) -> None:
    """Whoever reports the outage can say why: the store's own error is kept."""
    writer = BufferedWriter(store)
    assert writer.last_error is None
    outage.begin()
    writer.write(report("r1", 1))
    assert writer.last_error is not None
    assert "cannot reach the database" in str(writer.last_error)
    outage.end()


def test_flush_saves_the_backlog_and_stops_at_the_first_failure(
    store: RecordingStore, outage: Outage
) -> None:
    """flush saves nothing while storage is down and everything, in order, once it is back."""
    writer = BufferedWriter(store)
    outage.begin()
    writer.write(report("r1", 1))
    writer.write(report("r2", 2))
    assert writer.flush() == 0
    assert writer.pending == 2
    outage.end()
    assert writer.flush() == 2
    assert writer.flush() == 0
    assert store.saved == ["r1", "r2"]


def test_a_full_backlog_drops_the_oldest_run_and_reports_it(
    store: RecordingStore, outage: Outage
) -> None:
    """Memory is bounded: past capacity the oldest waiting run goes, and on_drop is told."""
    dropped: list[str] = []
    writer = BufferedWriter(store, capacity=2, on_drop=lambda r: dropped.append(r.run_id))
    outage.begin()
    for i in range(1, 5):
        writer.write(report(f"r{i}", i))
    assert dropped == ["r1", "r2"]
    assert writer.pending == 2
    outage.end()
    assert writer.flush() == 2
    assert store.saved == ["r3", "r4"]


@pytest.mark.parametrize("with_on_reject", [True, False])
def test_a_report_the_store_refuses_is_set_aside_without_blocking_the_rest(
    store: RecordingStore, outage: Outage, with_on_reject: bool
) -> None:
    """A report that can never be stored goes to on_reject (else on_drop); the rest is saved."""
    rejected: list[tuple[str, str]] = []
    dropped: list[str] = []
    writer = BufferedWriter(
        store,
        on_drop=lambda r: dropped.append(r.run_id),
        on_reject=(lambda r, e: rejected.append((r.run_id, str(e)))) if with_on_reject else None,
    )
    outage.begin()
    writer.write(report("r1", 1))
    writer.write(dataclasses.replace(report("bad", 2), target="t" * 201))
    writer.write(report("r2", 3))
    outage.end()
    assert writer.flush() == 2
    assert store.saved == ["r1", "r2"]
    assert writer.pending == 0
    if with_on_reject:
        assert [run_id for run_id, _ in rejected] == ["bad"]
        assert "target is not plain text" in rejected[0][1]
        assert dropped == []
    else:
        assert dropped == ["bad"]


def test_a_refused_report_is_not_queued_while_storage_is_up(store: RecordingStore) -> None:
    """With storage up, a report the store refuses is rejected at once, not retried."""
    rejected: list[StorageError] = []
    writer = BufferedWriter(store, on_reject=lambda r, e: rejected.append(e))
    nul = dataclasses.replace(report("bad").cases[0], id="nul\x00")
    assert writer.write(dataclasses.replace(report("bad"), cases=(nul,))) is False
    assert writer.pending == 0
    assert len(rejected) == 1


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_below_one_is_refused(store: RecordingStore, capacity: int) -> None:
    """A buffer that can hold nothing would silently drop every run during an outage."""
    with pytest.raises(ValueError, match="capacity"):
        BufferedWriter(store, capacity=capacity)


def test_concurrent_writes_each_save_exactly_once(store: RecordingStore) -> None:
    """Writes from several threads at once (asyncio.to_thread) all land, once each."""
    writer = BufferedWriter(store)
    with ThreadPoolExecutor(max_workers=4) as pool:
        saved = list(pool.map(lambda i: writer.write(report(f"r{i}", i)), range(20)))
    assert all(saved)
    assert sorted(store.saved) == sorted(f"r{i}" for i in range(20))
    assert writer.pending == 0
