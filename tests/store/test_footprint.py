"""What the store holds and its bytes (`ragcanary storage stats`, ``ragcanary_storage_bytes``),
on a real SQLite file and the local PostgreSQL: counts equal what was saved, bytes what the
files or the tables take, and a database not at this schema version is refused, unchanged."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy
from factories import case_entry, run_report
from version6 import write_version6

from ragcanary.measure.run_report import RunReport
from ragcanary.store.errors import StorageError, StorageUnavailable
from ragcanary.store.footprint import Footprint, footprint, stored_bytes
from ragcanary.store.schema import metadata
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CASES = ("alpha", "beta", "gamma")


def report(run_id: str, minutes: int, changed: frozenset[str] = frozenset()) -> RunReport:
    """A run of the three CASES ``minutes`` after NOW; only the ``changed`` ones answer with a
    ranking not seen before (every run's latencies differ)."""
    entries = [
        case_entry(
            case_id,
            ids=[f"{run_id}-doc"] if case_id in changed else [f"{case_id}-doc", "other"],
            latency_s=0.01 * (minutes + 1),
            metrics={"hit_rate@5": 1.0},
        )
        for case_id in CASES
    ]
    return run_report(run_id, started_at=NOW + timedelta(minutes=minutes), cases=entries)


def save_three(store: Store) -> list[RunReport]:
    """Three runs of three canaries, the last with beta's ranking changed: 4 rankings."""
    reports = [report("r1", 0), report("r2", 5), report("r3", 10, frozenset({"beta"}))]
    for saved in reports:
        store.save_run(saved)
    return reports


def files(store: Store) -> int:
    """The SQLite database file and its WAL, as the file system has them."""
    path = store.database_file
    assert path is not None
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def schema_bytes(store: Store) -> int:
    """Every table of the test's own PostgreSQL schema with its indexes and TOAST, found
    through pg_class rather than by the store's table names."""
    query = sqlalchemy.text(
        "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
    )
    with store.reading() as conn:
        return int(conn.execute(query).scalar_one())


def test_an_empty_store_has_its_tables_and_nothing_in_them(store: Store) -> None:
    found = footprint(store)
    assert (found.runs, found.rankings, found.answers, found.cases) == (0, 0, 0, 0)
    assert (found.oldest, found.newest, found.bytes_per_answer) == (None, None, None)
    assert found.tables is not None
    assert set(found.tables) == set(metadata.tables)
    assert all(size > 0 for size in found.tables.values()), found.tables
    assert (found.backend, found.location) == (store.dialect, store.location)


def test_counts_and_span_are_what_was_saved(store: Store) -> None:
    save_three(store)
    found = footprint(store)
    assert found.runs == 3
    assert found.answers == 9  # three canaries in three runs
    assert found.cases == 3
    assert found.rankings == 4  # alpha, beta, gamma once each, and beta's new one
    assert found.oldest == NOW
    assert found.newest == NOW + timedelta(minutes=10)
    assert found.bytes_per_answer == found.total_bytes / 9


def test_bytes_grow_with_what_is_saved(store: Store) -> None:
    empty = footprint(store)
    for minutes in range(60):  # every ranking new: more than a page of each table
        store.save_run(report(f"r{minutes}", minutes, frozenset(CASES)))
    full = footprint(store)
    assert full.total_bytes > empty.total_bytes
    assert full.tables is not None
    assert empty.tables is not None
    assert full.tables["rankings"] > empty.tables["rankings"]
    assert full.tables["runs"] > empty.tables["runs"]


def test_on_sqlite_the_bytes_are_the_database_file_and_its_wal(sqlite_url: str) -> None:
    with Store.from_url(sqlite_url) as store:
        store.migrate()
        save_three(store)
        found = footprint(store)
        assert found.total_bytes == files(store) > 0
        assert stored_bytes(store) == files(store)
        assert found.database_bytes is not None
        assert found.tables is not None
        # The tables' pages are the database's but for its schema page (and free pages).
        assert 0 < sum(found.tables.values()) < found.database_bytes


@pytest.mark.e2e
def test_on_postgresql_the_bytes_are_the_schema_s_tables(postgres_url: str) -> None:
    with Store.from_url(postgres_url) as store:
        store.migrate()
        save_three(store)
        found = footprint(store)
        assert found.tables is not None
        assert found.total_bytes == sum(found.tables.values()) == schema_bytes(store)
        assert stored_bytes(store) == found.total_bytes
        assert found.database_bytes is None


def test_a_missing_sqlite_file_is_refused_and_not_created(sqlite_url: str) -> None:
    with Store.from_url(sqlite_url) as store:
        path = store.database_file
        assert path is not None
        with pytest.raises(StorageError, match=r"no database at .*start `ragcanary serve` once"):
            footprint(store)
        assert list(path.parent.iterdir()) == []


def test_a_database_without_tables_is_refused(store_url: str) -> None:
    if store_url.startswith("sqlite"):  # an empty file, as sqlite3 leaves one
        sqlite3.connect(sqlalchemy.make_url(store_url).database or "").close()
    with Store.from_url(store_url) as store:
        with pytest.raises(StorageError, match=r"holds no ragcanary tables.*`ragcanary serve`"):
            footprint(store)
        assert store.schema_version() is None  # nothing was created


def test_an_older_schema_is_refused_and_left_as_it_was(store_url: str) -> None:
    write_version6(store_url, [report("old", 0)])
    with Store.from_url(store_url) as store:
        with pytest.raises(StorageError, match="schema version 6, older") as refused:
            footprint(store)
        assert "`ragcanary serve`" in str(refused.value)
        assert store.schema_version() == 6


def test_stored_bytes_of_a_vanished_file_is_unavailable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gone.db'}"
    with Store.from_url(url) as store:
        store.migrate()
        store.close()
        for file in tmp_path.iterdir():
            file.unlink()
        with pytest.raises(StorageUnavailable, match=r"gone\.db is gone"):
            stored_bytes(store)


def test_bytes_per_answer_is_none_without_answers() -> None:
    empty = Footprint("sqlite:///x", "sqlite", 0, 0, 0, 0, None, None, {}, 0, 4096)
    assert empty.bytes_per_answer is None
    full = Footprint("sqlite:///x", "sqlite", 1, 2, 4, 2, NOW, NOW, {}, 0, 400)
    assert full.bytes_per_answer == 100.0
