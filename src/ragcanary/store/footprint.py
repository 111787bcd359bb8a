"""What the store holds and the bytes it takes: `ragcanary storage stats` and the size gauge.

Nothing here creates, upgrades or writes a table. On SQLite the size is the database file and
its WAL as the file system has them (what fills the disk); per table, the pages SQLite's
``dbstat`` virtual table counts, when the library was built with it. On PostgreSQL both are
``pg_total_relation_size`` (indexes and TOAST included) of the store's tables as the storage
URL's ``search_path`` finds them: the database's other schemas are not the store's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import Connection, distinct, func, select, text

from ragcanary.store.errors import StorageError, StorageUnavailable
from ragcanary.store.migrations import UPGRADES, current_version, latest_version
from ragcanary.store.schema import answers, metadata, rankings, runs
from ragcanary.store.storage import Store

STORE_TABLES = tuple(sorted(metadata.tables))

# Each table's pages with its indexes' (an index's row names its table in sqlite_master).
_SQLITE_TABLES = text(
    "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat AS d "
    "JOIN sqlite_master AS m ON m.name = d.name GROUP BY m.tbl_name"
)
_POSTGRES_TABLES = text(
    "SELECT t.name, pg_total_relation_size(to_regclass(t.name)) "
    "FROM unnest(CAST(:names AS text[])) AS t(name)"
)
_POSTGRES_TOTAL = text(
    "SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(t.name))), 0) "
    "FROM unnest(CAST(:names AS text[])) AS t(name)"
)


@dataclass(frozen=True)
class Footprint:
    """The store at one moment: what it holds, how far back, and its bytes."""

    location: str  # the storage URL, its password hidden
    backend: str  # sqlite or postgresql
    runs: int
    rankings: int  # distinct rankings, each stored once (store.shared)
    answers: int  # canary-runs: one canary's answer in one run
    cases: int  # canaries with at least one stored answer
    oldest: datetime | None  # started_at of the oldest run; None without runs
    newest: datetime | None
    # Bytes of each of the store's tables with its indexes; None on a SQLite built without
    # dbstat, where ``database_bytes`` is the only split there is.
    tables: Mapping[str, int] | None
    # SQLite: the database's pages (page_count times page_size), its WAL aside; None on PostgreSQL.
    database_bytes: int | None
    # SQLite: the database file and its WAL; PostgreSQL: the sum of ``tables``.
    total_bytes: int

    @property
    def bytes_per_answer(self) -> float | None:
        """Total bytes over stored canary-runs; None while none is stored."""
        return self.total_bytes / self.answers if self.answers else None


def footprint(store: Store) -> Footprint:
    """Count and measure what ``store`` holds, without creating or upgrading anything.

    Raises StorageError (exit 2) when there is nothing to measure yet: a SQLite file that
    does not exist, a database without ragcanary's tables, or one at another schema version.
    """
    path = store.database_file
    if path is not None and not path.is_file():
        raise StorageError(
            f"no database at {path} (storage {store.location}): nothing was stored there yet; "
            "check `storage:` in the config (or RAGCANARY_STORAGE), or start `ragcanary serve` "
            "once to create it"
        )
    with store.reading() as conn:
        _check_version(conn, store.location)
        count, oldest, newest = conn.execute(
            select(
                func.count(runs.c.run_id), func.min(runs.c.started_at), func.max(runs.c.started_at)
            )
        ).one()
        answered, cases = conn.execute(
            select(func.count(), func.count(distinct(answers.c.case_key))).select_from(answers)
        ).one()
        ranked = conn.execute(select(func.count()).select_from(rankings)).scalar_one()
        database: int | None = None
        if store.dialect == "sqlite":
            tables = _sqlite_tables(conn)
            database = pages = _sqlite_pages(conn)
            total = pages if path is None else _file_bytes(path)
        else:
            tables = _postgres_tables(conn)
            total = sum(tables.values())
    return Footprint(
        location=store.location,
        backend=store.dialect,
        runs=count,
        rankings=ranked,
        answers=answered,
        cases=cases,
        oldest=oldest,
        newest=newest,
        tables=tables,
        database_bytes=database,
        total_bytes=total,
    )


def stored_bytes(store: Store) -> int:
    """The bytes ``store`` holds, cheaply: what ``ragcanary_storage_bytes`` exports.

    SQLite: the sizes of the database file and its WAL, no query. PostgreSQL: one query.
    Raises StorageUnavailable when they cannot be read.
    """
    path = store.database_file
    if path is not None:
        return _file_bytes(path)
    with store.reading() as conn:
        if store.dialect == "sqlite":
            return _sqlite_pages(conn)
        total: int = conn.execute(_POSTGRES_TOTAL, {"names": list(STORE_TABLES)}).scalar_one()
        return total


def _check_version(conn: Connection, location: str) -> None:
    version, latest = current_version(conn), latest_version(UPGRADES)
    if version is None:
        raise StorageError(
            f"the database at {location} holds no ragcanary tables; start `ragcanary serve` "
            "once to create them, or check that `storage:` in the config (or "
            "RAGCANARY_STORAGE) names the database the daemon uses"
        )
    if version < latest:
        raise StorageError(
            f"the database at {location} is at schema version {version}, older than this "
            f"ragcanary's {latest}, and stats never upgrade it; start this version's "
            "`ragcanary serve` once, or run `ragcanary runs`: either upgrades it in place"
        )
    if version > latest:
        raise StorageError(
            f"the database at {location} is at schema version {version}, newer than this "
            f"ragcanary knows ({latest}); upgrade ragcanary"
        )


def _sqlite_tables(conn: Connection) -> dict[str, int] | None:
    """Bytes of each store table with its indexes, or None when SQLite lacks dbstat."""
    options = {str(row[0]) for row in conn.exec_driver_sql("PRAGMA compile_options")}
    if "ENABLE_DBSTAT_VTAB" not in options:
        return None
    found = {str(name): int(size) for name, size in conn.execute(_SQLITE_TABLES)}
    return {name: found.get(name, 0) for name in STORE_TABLES}


def _sqlite_pages(conn: Connection) -> int:
    pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
    size = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
    return int(pages) * int(size)


def _postgres_tables(conn: Connection) -> dict[str, int]:
    found = conn.execute(_POSTGRES_TABLES, {"names": list(STORE_TABLES)})
    return {str(name): int(size) for name, size in found if size is not None}


def _file_bytes(path: Path) -> int:
    """The sizes of the database file and its WAL (absent between daemons: 0)."""
    total = 0
    for file in (path, path.with_name(f"{path.name}-wal")):
        try:
            total += file.stat().st_size
        except FileNotFoundError:
            if file == path:
                raise StorageUnavailable(
                    f"the database file {path} is gone; check `storage:` in the config"
                ) from None
        except OSError as exc:
            raise StorageUnavailable(
                f"cannot read the size of {file} ({exc.strerror}); check that its directory "
                "is readable"
            ) from None
    return total
