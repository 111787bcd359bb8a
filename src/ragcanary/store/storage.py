"""Runs, per-case results and pinned baselines in SQLite or PostgreSQL (SQLAlchemy Core).

    RagcanaryError
    └── StorageError               the database refused something: a malformed report, an
        │                          unknown run, a schema newer than this ragcanary
        └── StorageUnavailable     the database cannot be reached right now (down, locked,
                                   gone); nothing was written, so trying again later is safe

Every SQLAlchemy and driver error is translated here; callers never see them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self

import sqlalchemy
from sqlalchemy import Connection, Engine, and_, delete, event, exc, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from ragcanary.errors import RagcanaryError
from ragcanary.store.schema import (
    JSON_ENCODER,
    UPGRADES,
    VECTOR_KEY,
    Upgrade,
    case_entry,
    case_row,
    claims,
    current_version,
    decode_ids,
    latest_version,
    migrate,
    not_plain_json,
    point_row,
    points,
    replicas,
    results,
    run_row,
    runs,
    schema_version,
    vector_row,
    vectors,
)
from ragcanary.store.schema import baselines as baselines_table

# Outcomes of runs worth keeping longer: they are what an incident review looks for.
FAILED_OUTCOMES = ("regression", "unavailable")
SQLITE_BUSY_TIMEOUT_MS = 10_000
# Every PostgreSQL call has a deadline, so a database that stops answering (down, or packets
# silently dropped) fails a call within seconds instead of holding a thread for minutes.
POSTGRES_CONNECT_TIMEOUT_S = 5
POSTGRES_STATEMENT_TIMEOUT_MS = 10_000
POSTGRES_LOCK_TIMEOUT_MS = 5_000
# A socket whose sent data stays unacknowledged this long is dead (libpq's tcp_user_timeout);
# keepalives find a silent peer while nothing is being sent.
POSTGRES_TCP_USER_TIMEOUT_MS = 10_000
POSTGRES_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
}
POOL_TIMEOUT_S = 5  # waiting for a pooled connection
CLAIM_LOCK_TIMEOUT_MS = 1000
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a lock_timeout
FORGET_REPLICAS = timedelta(days=1)  # a replica not seen this long leaves the replicas table
_WRITE = "ragcanary_write"  # execution option: this transaction will write
# SQLite result codes that mean "not reachable now" rather than "wrong request":
# PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL.
_SQLITE_UNAVAILABLE = {3, 5, 6, 7, 8, 10, 13, 14, 15}


class StorageError(RagcanaryError):
    """The database refused a request; the message says what and what to do."""


class StorageUnavailable(StorageError):
    """The database cannot be reached right now; the request can be retried later."""


def make_engine(url: str, **options: Any) -> Engine:
    """An engine for ``url`` as ragcanary needs it; ``options`` go to ``sqlalchemy.create_engine``.

    SQLite gets WAL (readers never block the writer), foreign keys, a busy timeout and real
    transactions; every backend gets pre-ping, so connections dropped during an outage are
    replaced instead of failing once more after it ends.
    """
    try:
        parsed = sqlalchemy.make_url(url)
    except exc.ArgumentError:
        raise StorageError(
            "the storage URL is not valid; write sqlite:///path/to/ragcanary.db "
            "or postgresql+psycopg://user@host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StorageError(
            f"storage {parsed.render_as_string(hide_password=True)} is not supported; "
            "use sqlite:///path/to/ragcanary.db or postgresql+psycopg://user@host/db"
        )
    options.setdefault("pool_pre_ping", True)
    # One encoder for every value: json.dumps with options would build a new one each time.
    options["json_serializer"] = JSON_ENCODER.encode
    if "poolclass" not in options:  # NullPool has no wait for a pooled connection
        options.setdefault("pool_timeout", POOL_TIMEOUT_S)
    if backend == "postgresql":
        connect_args = dict(options.get("connect_args", {}))
        deadlines: dict[str, Any] = {
            "connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
            "tcp_user_timeout": POSTGRES_TCP_USER_TIMEOUT_MS,
            **POSTGRES_KEEPALIVES,
        }
        for key, value in deadlines.items():
            if key not in parsed.query:  # the storage URL's own settings win
                connect_args.setdefault(key, value)
        options["connect_args"] = connect_args
    try:
        engine = sqlalchemy.create_engine(parsed, **options)
    except (exc.SQLAlchemyError, ImportError) as error:
        where = parsed.render_as_string(hide_password=True)
        raise StorageError(f"cannot use storage {where}: {error}") from None
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        event.listen(engine, "connect", _postgres_connect)
    return engine


def _postgres_connect(dbapi_connection: Any, _record: Any) -> None:
    # Instants then arrive in UTC already (tzinfo datetime.UTC), which UTCDateTime passes on
    # as they are instead of converting each one: a tenth of reading a 30-day history.
    dbapi_connection.execute("SET TIME ZONE 'UTC'")
    # Not through the URL's `options`: the storage URL may carry its own (a search_path).
    dbapi_connection.execute(f"SET statement_timeout = {POSTGRES_STATEMENT_TIMEOUT_MS}")
    dbapi_connection.execute(f"SET lock_timeout = {POSTGRES_LOCK_TIMEOUT_MS}")
    dbapi_connection.commit()  # or the pool's rollback on return would undo the SETs


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # sqlite3 would only BEGIN before DML, leaving DDL and reads outside transactions;
    # _sqlite_begin emits BEGIN itself instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        # With WAL, NORMAL only risks the last commits on power loss, never corruption.
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # A writer takes the write lock up front: a deferred transaction that read first cannot
    # wait for the lock (SQLite returns BUSY at once), an immediate one waits busy_timeout.
    write = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Store:
    """Runs (their report dicts), per-case results and pinned baselines in one database.

    Safe to share between threads (each call takes its own pooled connection); the daemon
    calls it through ``asyncio.to_thread``.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        upgrades: Mapping[int, Upgrade] = UPGRADES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        prune_batch: int = 500,
    ) -> None:
        if engine.dialect.name not in ("sqlite", "postgresql"):
            raise StorageError(f"storage on {engine.dialect.name} is not supported")
        self._engine = engine
        self._upgrades = upgrades
        latest_version(upgrades)  # fail early on a gap in the numbering
        self._clock = clock
        self._prune_batch = prune_batch
        self._where = engine.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return str(self._engine.dialect.name)

    @classmethod
    def from_url(cls, url: str) -> Store:
        """A store on ``sqlite:///path`` or ``postgresql+psycopg://...``; call ``migrate`` next."""
        return cls(make_engine(url))

    def migrate(self) -> None:
        """Create the schema, or upgrade an older one in place keeping its data; else no-op."""
        with self._write() as conn:
            try:
                migrate(conn, self._upgrades, self._clock())
            except ValueError as error:
                raise StorageError(
                    f"the database at {self._where}: {error}; upgrade ragcanary, or point "
                    "storage at another database"
                ) from None

    def schema_version(self) -> int | None:
        """The database's schema version, or None before the first ``migrate``."""
        with self._read() as conn:
            return current_version(conn)

    def save_run(self, report: Mapping[str, Any]) -> None:
        """Store one run's report dict; saving a run_id that is already stored changes nothing.

        A replica's run names the tick it claimed (``claim``: job and tick). When another
        replica has since taken that tick over (``adopt_claim``: this one was cut off and
        counted dead), the tick has its run already and this one is not stored.
        """
        try:
            row = run_row(report)
            run_id, cases = row["run_id"], report["cases"]
            vector_rows = [v for i, c in enumerate(cases) if (v := vector_row(run_id, i, c))]
            stored = {v["position"] for v in vector_rows}
            case_rows = [
                case_row(run_id, i, _without(VECTOR_KEY, c) if i in stored else c)
                for i, c in enumerate(cases)
            ]
            point_rows = [point_row(row, i, c) for i, c in enumerate(cases)]
        except ValueError as error:
            raise StorageError(f"{error}; only report dicts of to_report can be stored") from None
        with self._write() as conn:
            if _taken_over(conn, report):
                return
            insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            added = conn.execute(
                insert(runs)
                .values(row)
                .on_conflict_do_nothing(index_elements=["run_id"])
                .returning(runs.c.run_id)
            ).first()
            if added is not None and case_rows:
                try:
                    conn.execute(results.insert(), case_rows)
                except exc.DBAPIError:
                    raise
                except (exc.StatementError, TypeError, ValueError) as error:
                    raise _refused(row["run_id"], error) from None
                conn.execute(points.insert(), point_rows)
            if added is not None and vector_rows:
                conn.execute(vectors.insert(), vector_rows)
                _forget_vectors(conn, row["suite"], row["target"])

    def get_report(self, run_id: str) -> dict[str, Any] | None:
        """The report dict saved for ``run_id``, or None.

        Equal to what was saved, but for the cases' query vectors once the run is neither its
        pair's pinned baseline nor its newest run with vectors (those alone keep them).
        """
        with self._read() as conn:
            report = conn.execute(
                select(runs.c.report).where(runs.c.run_id == run_id)
            ).scalar_one_or_none()
            if report is None:
                return None
            rows = conn.execute(
                select(results).where(results.c.run_id == run_id).order_by(results.c.position)
            ).all()
            kept = {
                row.position: row.vector
                for row in conn.execute(select(vectors).where(vectors.c.run_id == run_id))
            }
        cases = [case_entry(row._mapping) for row in rows]
        for position, vector in kept.items():
            cases[position][VECTOR_KEY] = vector
        return {**report, "cases": cases}

    def list_runs(
        self,
        suite: str | None = None,
        target: str | None = None,
        limit: int = 50,
        outcome: str | None = None,
        since: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Summaries of the newest runs first, optionally of one suite, target, outcome, or
        started at ``since`` or later."""
        query = _summaries().limit(max(limit, 0))
        if suite is not None:
            query = query.where(runs.c.suite == suite)
        if target is not None:
            query = query.where(runs.c.target == target)
        if outcome is not None:
            query = query.where(runs.c.outcome == outcome)
        if since is not None:
            query = query.where(runs.c.started_at >= _aware(since, "since"))
        with self._read() as conn:
            return [_summary(row._mapping) for row in conn.execute(query)]

    def latest_run(
        self,
        suite: str,
        target: str,
        *,
        outcome: str | None = None,
        exclude_unavailable: bool = True,
    ) -> dict[str, Any] | None:
        """The summary of the newest run of ``suite`` on ``target`` (with ``outcome``, if given)."""
        query = _summaries().where(runs.c.suite == suite, runs.c.target == target).limit(1)
        if outcome is not None:
            query = query.where(runs.c.outcome == outcome)
        if exclude_unavailable:
            query = query.where(runs.c.outcome != "unavailable")
        with self._read() as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else _summary(row._mapping)

    def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` as the baseline of ``suite`` on ``target``, replacing any earlier one."""
        with self._write() as conn:
            run = conn.execute(
                select(runs.c.suite, runs.c.target).where(runs.c.run_id == run_id)
            ).one_or_none()
            if run is None:
                raise StorageError(f"no run {run_id!r} in storage; pick one from GET /api/v1/runs")
            if (run.suite, run.target) != (suite, target):
                raise StorageError(
                    f"run {run_id!r} is of suite {run.suite!r} on target {run.target!r}, "
                    f"not {suite!r} on {target!r}; pick a run of that suite and target"
                )
            insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            row = {"suite": suite, "target": target, "run_id": run_id, "set_at": self._clock()}
            conn.execute(
                insert(baselines_table)
                .values(row)
                .on_conflict_do_update(
                    index_elements=["suite", "target"],
                    set_={"run_id": run_id, "set_at": row["set_at"]},
                )
            )

    def get_baseline(self, suite: str, target: str) -> str | None:
        """The run_id pinned as the baseline of ``suite`` on ``target``, or None."""
        with self._read() as conn:
            return conn.execute(
                select(baselines_table.c.run_id).where(
                    baselines_table.c.suite == suite, baselines_table.c.target == target
                )
            ).scalar_one_or_none()

    def baselines(self) -> list[dict[str, Any]]:
        """Every pinned baseline: suite, target, run_id, set_at (aware UTC)."""
        query = select(baselines_table).order_by(baselines_table.c.suite, baselines_table.c.target)
        with self._read() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def case_history(
        self,
        suite: str,
        case_id: str,
        target: str | None = None,
        since: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """One canary over time, oldest first: its answer in every stored run of ``suite``.

        Each row: run_id, started_at (aware UTC), target, run_outcome, and the case's
        outcome, error, latency_s, top_score and ids (None when absent). Scores, metrics
        and the comparison with the baseline are in each run's full report (get_report).
        """
        query = history_query(suite, case_id, target, since)
        with self._read() as conn:
            rows = conn.execute(query).all()
        # A month of one canary is 8,640 rows: every microsecond per row counts.
        return [
            {
                "run_id": run_id,
                "started_at": at,
                "target": target,
                "run_outcome": run_outcome,
                "outcome": outcome,
                "error": error,
                "latency_s": latency,
                "top_score": top,
                "ids": None if ids is None else decode_ids(ids),
            }
            for run_id, at, target, run_outcome, outcome, error, latency, top, ids in rows
        ]

    def answered_runs(self, suite: str, target: str, newest: int) -> list[tuple[str, datetime]]:
        """The ``newest`` answered runs of the pair (run id, started_at), newest first: the
        window stale labels are checked over."""
        latest = (
            select(runs.c.run_id, runs.c.started_at)
            .where(
                runs.c.suite == suite,
                runs.c.target == target,
                runs.c.outcome != "unavailable",
            )
            .order_by(runs.c.started_at.desc())
            .limit(max(newest, 0))
        )
        with self._read() as conn:
            return [(run_id, at) for run_id, at in conn.execute(latest)]

    def returned_by(self, suite: str, run_ids: Sequence[str]) -> dict[str, set[str]]:
        """Every id any case of each of ``run_ids`` (runs of ``suite``) returned, by run id;
        a run whose cases returned none is absent."""
        returned: dict[str, set[str]] = {}
        with self._read() as conn:
            rows = conn.execute(
                select(points.c.run_id, points.c.ids).where(
                    points.c.suite == suite,
                    points.c.run_id.in_(list(run_ids)),
                    points.c.ids.is_not(None),
                )
            )
            for run_id, text in rows:
                returned.setdefault(run_id, set()).update(str(i) for i in decode_ids(text))
        return returned

    def heartbeat(
        self, replica_id: str, started_at: datetime, config_hash: str, version: str
    ) -> list[dict[str, Any]]:
        """Say that ``replica_id`` is alive now; every replica's row (ids, seen_at, hashes).

        Replicas not seen for a day are forgotten.
        """
        now = self._clock()
        row = {
            "replica_id": replica_id,
            "started_at": started_at,
            "seen_at": now,
            "config_hash": config_hash,
            "version": version,
        }
        with self._write() as conn:
            insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            conn.execute(
                insert(replicas)
                .values(row)
                .on_conflict_do_update(
                    index_elements=["replica_id"],
                    set_={"seen_at": now, "config_hash": config_hash, "version": version},
                )
            )
            conn.execute(delete(replicas).where(replicas.c.seen_at < now - FORGET_REPLICAS))
            rows = conn.execute(select(replicas).order_by(replicas.c.replica_id)).all()
        return [dict(r._mapping) for r in rows]

    def claim(self, job: str, tick: datetime, replica_id: str, run_id: str) -> bool:
        """Take the ``tick`` of ``job`` for ``replica_id``; False when another replica has it."""
        row = {
            "job": job,
            "tick": _aware(tick, "tick"),
            "replica_id": replica_id,
            "run_id": run_id,
            "claimed_at": self._clock(),
        }
        try:
            with self._write() as conn:
                insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
                if conn.dialect.name == "postgresql":
                    _wait_briefly_for_claims(conn)
                taken = conn.execute(
                    insert(claims)
                    .values(row)
                    .on_conflict_do_nothing(index_elements=["job", "tick"])
                    .returning(claims.c.job)
                ).first()
        except StorageError as exc:
            if _lock_timed_out(exc):
                return False
            raise
        return taken is not None

    def orphan_claims(
        self, live: Iterable[str], since: datetime, until: datetime
    ) -> list[tuple[str, datetime, str]]:
        """Ticks claimed between ``since`` and ``until`` by a replica not in ``live`` whose run
        was never stored (it died in the middle): job, tick and the dead claimant. When it was
        claimed, not the tick, says how long ago it ran: a job fires up to an interval after
        the grid point that names its tick (``serve.replicas``)."""
        query = select(claims.c.job, claims.c.tick, claims.c.replica_id).where(
            claims.c.claimed_at >= _aware(since, "since"),
            claims.c.claimed_at <= _aware(until, "until"),
            claims.c.replica_id.not_in(list(live)),
            ~_CLAIMED_RUN_STORED,
        )
        with self._read() as conn:
            return [(r.job, r.tick, r.replica_id) for r in conn.execute(query)]

    def adopt_claim(
        self, job: str, tick: datetime, dead: str, replica_id: str, run_id: str
    ) -> bool:
        """Take over ``dead``'s claim of ``tick`` to run it again; False if another did, or
        if its run was stored after all (a replica cut off, not dead, storing it late).

        The claim's row is locked first, as ``save_run`` locks it before storing a claimed
        run: a save in progress finishes before the check for a stored run, which as a new
        statement sees what that save committed. Checked in one statement alone, a run being
        stored was not there yet, and the tick got a second run. A row locked by a session
        that hangs (a replica cut off mid-save) is given up after a short wait.
        """
        theirs = (claims.c.job == job, claims.c.tick == _aware(tick, "tick"))
        try:
            with self._write() as conn:
                if conn.dialect.name == "postgresql":
                    _wait_briefly_for_claims(conn)
                    conn.execute(select(claims.c.job).where(*theirs).with_for_update())
                done = conn.execute(
                    update(claims)
                    .where(*theirs, claims.c.replica_id == dead, ~_CLAIMED_RUN_STORED)
                    .values(replica_id=replica_id, run_id=run_id, claimed_at=self._clock())
                )
        except StorageError as exc:
            if _lock_timed_out(exc):
                return False
            raise
        return bool(done.rowcount)

    def latest_runs(
        self, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[str, datetime]]]:
        """Per pair, the run id and start of its newest run and, if that was unavailable, of
        its newest answered run (newest first): what a replica shows of a pair it did not run.
        """
        out: dict[tuple[str, str], list[tuple[str, datetime]]] = {}
        with self._read() as conn:
            for suite, target in pairs:
                newest = (
                    select(runs.c.run_id, runs.c.outcome, runs.c.started_at)
                    .where(runs.c.suite == suite, runs.c.target == target)
                    .order_by(runs.c.started_at.desc())
                    .limit(1)
                )
                found = conn.execute(newest).first()
                if found is None:
                    continue
                ids = [(found.run_id, found.started_at)]
                if found.outcome == "unavailable":
                    answered = newest.where(runs.c.outcome != "unavailable")
                    if (other := conn.execute(answered).first()) is not None:
                        ids.append((other.run_id, other.started_at))
                out[(suite, target)] = ids
        return out

    def prune(self, now: datetime, keep: timedelta, keep_failed: timedelta) -> int:
        """Delete runs (and their results) older than ``keep``; return how many were deleted.

        Regressed and unavailable runs are kept for ``keep_failed`` (at least ``keep``); a run
        pinned as a baseline is never deleted. Deletes in batches so no transaction holds
        the write lock for long.
        """
        now = _aware(now, "now")
        failed = runs.c.outcome.in_(FAILED_OUTCOMES)
        expired = or_(
            and_(~failed, runs.c.started_at < now - keep),
            and_(failed, runs.c.started_at < now - max(keep, keep_failed)),
        )
        batch = (
            select(runs.c.run_id)
            .where(expired, runs.c.run_id.not_in(select(baselines_table.c.run_id)))
            .order_by(runs.c.started_at)
            .limit(self._prune_batch)
        )
        with self._write() as conn:
            conn.execute(delete(claims).where(claims.c.tick < now - keep))
        deleted = 0
        while True:
            with self._write() as conn:
                run_ids = list(conn.execute(batch).scalars())
                if run_ids:
                    conn.execute(delete(vectors).where(vectors.c.run_id.in_(run_ids)))
                    conn.execute(delete(points).where(points.c.run_id.in_(run_ids)))
                    conn.execute(delete(results).where(results.c.run_id.in_(run_ids)))
                    conn.execute(delete(runs).where(runs.c.run_id.in_(run_ids)))
            deleted += len(run_ids)
            if len(run_ids) < self._prune_batch:
                return deleted

    def ping(self) -> None:
        """Raise StorageUnavailable when the database cannot be reached."""
        with self._read() as conn:
            conn.execute(text("SELECT 1"))

    def check_write(self) -> None:
        """Raise StorageUnavailable unless a write commits now (call ``migrate`` first).

        A real, harmless write: reachable is not enough, a read-only file or a database in
        recovery answers reads and refuses every run.
        """
        with self._write() as conn:
            conn.execute(update(schema_version).values(applied_at=schema_version.c.applied_at))

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def reading(self) -> contextlib.AbstractContextManager[Connection]:
        """A read transaction, its errors translated (for the store's other modules)."""
        return self._read()

    def writing(self) -> contextlib.AbstractContextManager[Connection]:
        """A write transaction, its errors translated (for the store's other modules)."""
        return self._write()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._translate(), self._engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self._translate(), self._engine.connect() as conn:
                conn.execution_options(**{_WRITE: True})
                with conn.begin():
                    yield conn
        except StorageUnavailable:
            # SQLite opens a file it could not write read-only and keeps it so: pooled
            # connections would refuse writes forever after the file became writable again.
            self._engine.dispose()
            raise

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except (exc.SQLAlchemyError, sqlite3.Error) as error:
            raise self._translated(error) from error

    def _translated(self, error: exc.SQLAlchemyError | sqlite3.Error) -> StorageError:
        driver_error = error.orig if isinstance(error, exc.DBAPIError) else error
        reason = " ".join(str(driver_error).split()) or type(driver_error).__name__
        if _unavailable(error):
            hint = (
                "check that the directory exists and is writable, and that no other process "
                "holds a long write lock"
                if self._engine.dialect.name == "sqlite"
                else "check that PostgreSQL is running and reachable, and the storage URL"
            )
            return StorageUnavailable(
                f"cannot reach the database at {self._where}: {reason}; {hint}"
            )
        if isinstance(error, exc.StatementError) and not isinstance(error, exc.DBAPIError):
            reason = f"a value could not be stored ({reason})"
        return StorageError(f"the database at {self._where} refused the request: {reason}")


def _refused(run_id: str, error: Exception) -> StorageError:
    """The error for a case value ``JSON_ENCODER`` refused as its column was bound.

    Through SQLite that error comes wrapped in a ``StatementError``, through psycopg as raised.
    """
    cause = error.orig if isinstance(error, exc.StatementError) else error
    return StorageError(str(not_plain_json(f"report {run_id!r}", cause or error)))


def _unavailable(error: exc.SQLAlchemyError | sqlite3.Error) -> bool:
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, exc.TimeoutError | exc.DisconnectionError):  # pool exhausted / dropped
        return True
    driver_error = error.orig if isinstance(error, exc.DBAPIError) else error
    if isinstance(driver_error, sqlite3.Error):
        # sqlite3 reports a missing table and a locked database alike as OperationalError.
        code = getattr(driver_error, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_UNAVAILABLE
    return isinstance(error, exc.OperationalError | exc.InterfaceError)


# Whether the run a claim names is stored: a claim without it is still to be run.
_CLAIMED_RUN_STORED = select(runs.c.run_id).where(runs.c.run_id == claims.c.run_id).exists()


def _wait_briefly_for_claims(conn: Connection) -> None:
    """Wait for a claim's row lock at most ``CLAIM_LOCK_TIMEOUT_MS`` in this transaction. A row
    another replica locked and never committed (it was cut off) stays locked until its session
    dies: a short wait, then the claim counts as another's."""
    conn.execute(text(f"SET LOCAL lock_timeout = {CLAIM_LOCK_TIMEOUT_MS}"))


def _lock_timed_out(exc: StorageError) -> bool:
    """Whether ``exc`` is PostgreSQL giving up a lock wait (``lock_timeout``)."""
    return getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None) == LOCK_NOT_AVAILABLE


def _taken_over(conn: Connection, report: Mapping[str, Any]) -> bool:
    """Whether the tick ``report``'s run claimed now belongs to another run.

    A run made while storage was down (``claimed`` false) claims its tick here, in the
    transaction that stores it: when another replica claimed the tick meanwhile, it is out.
    The claim's row stays locked until the run is stored, so an adoption (``adopt_claim``)
    waits for it and then finds the run.
    """
    claim = report.get("claim")
    if not isinstance(claim, Mapping) or conn.dialect.name != "postgresql":
        return False
    try:
        tick = datetime.fromisoformat(str(claim.get("tick")))
    except ValueError:
        return False
    if claim.get("claimed") is False:
        row = {
            "job": claim.get("job"),
            "tick": tick,
            "replica_id": str(claim.get("replica")),
            "run_id": report.get("run_id"),
            "claimed_at": tick,
        }
        taken = conn.execute(
            postgresql.insert(claims)
            .values(row)
            .on_conflict_do_nothing(index_elements=["job", "tick"])
            .returning(claims.c.job)
        ).first()
        if taken is not None:
            return False
    owner = conn.execute(
        select(claims.c.run_id)
        .where(claims.c.job == claim.get("job"), claims.c.tick == tick)
        .with_for_update()
    ).scalar_one_or_none()
    return owner is not None and owner != report.get("run_id")


def _without(key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


def _forget_vectors(conn: Connection, suite: str, target: str) -> None:
    """Delete the pair's query vectors but the pinned baseline's and the newest run's."""
    pair = and_(runs.c.suite == suite, runs.c.target == target)
    with_vectors = runs.c.run_id.in_(select(vectors.c.run_id))
    newest = (
        select(runs.c.run_id)
        .where(pair, with_vectors)
        .order_by(runs.c.started_at.desc())
        .limit(1)
        .scalar_subquery()
    )
    pinned = select(baselines_table.c.run_id).where(
        baselines_table.c.suite == suite, baselines_table.c.target == target
    )
    stale = (
        select(vectors.c.run_id)
        .join(runs, runs.c.run_id == vectors.c.run_id)
        .where(pair, vectors.c.run_id != newest, vectors.c.run_id.not_in(pinned))
    )
    conn.execute(delete(vectors).where(vectors.c.run_id.in_(stale)))


def _aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None:
        raise StorageError(f"{name}={moment.isoformat()} has no timezone; pass an aware datetime")
    return moment


_POINT_COLUMNS = [
    points.c[name]
    for name in (
        "run_id",
        "started_at",
        "target",
        "run_outcome",
        "outcome",
        "error",
        "latency_s",
        "top_score",
        "ids",
    )
]


def history_query(
    suite: str, case_id: str, target: str | None = None, since: datetime | None = None
) -> sqlalchemy.Select[Any]:
    """The SELECT behind ``Store.case_history``: one range of the points table's key."""
    query = select(*_POINT_COLUMNS).where(points.c.suite == suite, points.c.case_id == case_id)
    if target is not None:
        query = query.where(points.c.target == target)
    if since is not None:
        query = query.where(points.c.started_at >= _aware(since, "since"))
    return query.order_by(points.c.started_at, points.c.run_id, points.c.position)


def _summaries() -> sqlalchemy.Select[Any]:
    return select(
        runs.c.run_id,
        runs.c.suite,
        runs.c.target,
        runs.c.started_at,
        runs.c.duration_s,
        runs.c.outcome,
        runs.c.coverage,
        # The database extracts the two objects a summary shows: a report with a thousand
        # cases is hundreds of kB that a list of fifty runs need not read or decode.
        runs.c.report["metrics"].label("metrics"),
        runs.c.report[("baseline", "deltas")].label("deltas"),
    ).order_by(runs.c.started_at.desc(), runs.c.run_id.desc())


def _summary(row: Mapping[Any, Any]) -> dict[str, Any]:
    return dict(row)
