"""Runs, per-case results and pinned baselines in SQLite or PostgreSQL (SQLAlchemy Core).

Every SQLAlchemy and driver error is translated here into ``store.errors``; callers never see
them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Connection, Engine, Table, and_, delete, exc, func, or_, select, text

from ragcanary.measure.case_verdict import RunFindings
from ragcanary.measure.report_json import marshal, unmarshal, unmarshal_case
from ragcanary.measure.run_report import CaseEntry, RunReport
from ragcanary.store import reading
from ragcanary.store.claims import ClaimsMixin, taken_over
from ragcanary.store.engine import WRITE, insert_for, make_engine
from ragcanary.store.errors import StorageError, StorageUnavailable
from ragcanary.store.migrations import UPGRADES, Upgrade, current_version, latest_version, migrate
from ragcanary.store.pruning import (
    SHARED_VALUES_LOCK,
    VALUES_BATCH,
    Unreferenced,
    delete_runs,
    delete_values,
    find_unreferenced,
)
from ragcanary.store.queries import aware, forget_vectors, history_query, summaries, summarised
from ragcanary.store.remembered import Remembered
from ragcanary.store.rows import VECTOR_KEY, not_plain_json, run_row, vector_row
from ragcanary.store.schema import baselines as baselines_table
from ragcanary.store.schema import claims, rankings, run_parts, runs, vectors
from ragcanary.store.shared import VERDICTS, shared_values
from ragcanary.store.writing import RunRows, insert_run

# Runs deleted per transaction: a day of a 1,000-canary pair at 5 minutes is 288 runs and
# 288,000 answers, and a run being stored waits for each transaction's write lock.
PRUNE_BATCH = 20
HISTORY_VIEWS = 100_000  # rankings whose history view a store remembers (a few MB)
# Rankings whose case entry a store remembers: a whole run and its baseline of a suite of
# 1,000 canaries, about 4 kB each at depth 10 (docs/performance.md, "Web pages").
CASE_ENTRIES = 2_500
# Outcomes of runs worth keeping longer: they are what an incident review looks for.
FAILED_OUTCOMES = ("regression", "unavailable")
# SQLite result codes that mean "not reachable now" rather than "wrong request":
# PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL.
_SQLITE_UNAVAILABLE = {3, 5, 6, 7, 8, 10, 13, 14, 15}
# run_id (with random hex digits after it), suite and target of check_write's row: nobody
# sees that row, but a database log of a failed check names it.
_PROBE_PREFIX = "~write-check-"


def _at_once(step: Callable[[], int]) -> int:
    """Run a step of a prune in the calling thread (``Store.prune``'s default)."""
    return step()


class Store(ClaimsMixin):
    """Runs (their reports), per-case results and pinned baselines in one database.

    Safe to share between threads (each call takes its own pooled connection); the daemon
    calls it in worker threads (``ragcanary.threads.run_in``).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        upgrades: Mapping[int, Upgrade] = UPGRADES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        prune_batch: int = PRUNE_BATCH,
    ) -> None:
        if engine.dialect.name not in ("sqlite", "postgresql"):
            raise StorageError(f"storage on {engine.dialect.name} is not supported")
        self._engine = engine
        self._upgrades = upgrades
        latest_version(upgrades)  # fail early on a gap in the numbering
        self._clock = clock
        self._prune_batch = prune_batch
        self._where = engine.url.render_as_string(hide_password=True)
        # What a history shows of each ranking read for one (a month of one canary names
        # hundreds, a fifth of the history's time to decode), and the case entry of each
        # ranking a report was read with (most of a whole report's time): store.remembered.
        self._shown: Remembered[tuple[Any, ...]] = Remembered(HISTORY_VIEWS)
        self._entries: Remembered[CaseEntry] = Remembered(CASE_ENTRIES)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return str(self._engine.dialect.name)

    @property
    def location(self) -> str:
        """The storage URL as messages name the database: its password hidden."""
        return self._where

    @property
    def database_file(self) -> Path | None:
        """The SQLite database's file; None on PostgreSQL and for a database in memory."""
        database = self._engine.url.database
        if self.dialect != "sqlite" or not database or database == ":memory:":
            return None
        return Path(database)

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

    def save_run(self, report: RunReport) -> None:
        """Store one run's report; saving a run_id that is already stored changes nothing.

        A replica's run names the tick it claimed (``claim``: job and tick). When another
        replica has since taken that tick over (``adopt_claim``: this one was cut off and
        counted dead), the tick has its run already and this one is not stored.
        """
        try:
            data = marshal(report)
            row = run_row(report, data)
            run_id, cases = report.run_id, data["cases"]
            vector_rows = [v for i, c in enumerate(cases) if (v := vector_row(run_id, i, c))]
            stored = {v["position"] for v in vector_rows}
            findings = RunFindings.of_report(report)
            rows = RunRows(
                run=row,
                entries=[
                    _without(VECTOR_KEY, c) if i in stored else c for i, c in enumerate(cases)
                ],
                verdicts=[findings.verdict(case.id, case.outcome) for case in report.cases],
            )
        except ValueError as error:
            raise StorageError(f"{error}; only reports of build_report can be stored") from None
        with self._write() as conn:
            if taken_over(conn, report):
                return
            if conn.dialect.name == "postgresql":  # pruning deletes no value this run reuses
                conn.execute(select(func.pg_advisory_xact_lock_shared(SHARED_VALUES_LOCK)))
            try:
                added = insert_run(conn, rows)
            except ValueError as error:
                raise StorageError(str(not_plain_json(f"report {run_id!r}", error))) from None
            if added and vector_rows:
                conn.execute(vectors.insert(), vector_rows)
                forget_vectors(conn, row["suite"], row["target"])

    def get_report(self, run_id: str) -> RunReport | None:
        """The report saved for ``run_id``, or None.

        Equal to what was saved, but for the cases' query vectors once the run is neither its
        pair's pinned baseline nor its newest run with vectors (those alone keep them).
        """
        with self._read() as conn:
            run = conn.execute(
                select(*reading.RUN_COLUMNS).where(runs.c.run_id == run_id)
            ).one_or_none()
            if run is None:
                return None
            head = reading.heads(conn, [run])[run_id]
            answered = reading.answers_of(conn, run)
            entries = self._entries.read(
                {ranking for _latency, ranking in answered},
                lambda keys: {
                    key: unmarshal_case(value)
                    for key, value in shared_values(conn, rankings, keys).items()
                },
            )
            kept = {
                row.position: row.vector
                for row in conn.execute(select(vectors).where(vectors.c.run_id == run_id))
            }
        cases = [entries[ranking] for _latency, ranking in answered]
        for position, (latency, _ranking) in enumerate(answered):
            if latency is not None:  # else the ranking's own (with_latency)
                cases[position] = dataclasses.replace(cases[position], latency_s=latency)
        for position, vector in kept.items():
            cases[position] = dataclasses.replace(cases[position], query_vector=vector)
        return unmarshal(head, tuple(cases))

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
        query = summaries().limit(max(limit, 0))
        if suite is not None:
            query = query.where(runs.c.suite == suite)
        if target is not None:
            query = query.where(runs.c.target == target)
        if outcome is not None:
            query = query.where(runs.c.outcome == outcome)
        if since is not None:
            query = query.where(runs.c.started_at >= aware(since, "since"))
        with self._read() as conn:
            return summarised(conn, conn.execute(query).all())

    def latest_run(
        self,
        suite: str,
        target: str,
        *,
        outcome: str | None = None,
        exclude_unavailable: bool = True,
    ) -> dict[str, Any] | None:
        """The summary of the newest run of ``suite`` on ``target`` (with ``outcome``, if given)."""
        query = summaries().where(runs.c.suite == suite, runs.c.target == target).limit(1)
        if outcome is not None:
            query = query.where(runs.c.outcome == outcome)
        if exclude_unavailable:
            query = query.where(runs.c.outcome != "unavailable")
        with self._read() as conn:
            found = summarised(conn, conn.execute(query).all())
        return found[0] if found else None

    def set_baseline(self, suite: str, target: str, run_id: str, reason: str | None = None) -> None:
        """Pin ``run_id`` as the baseline of ``suite`` on ``target``, replacing any earlier one;
        ``reason`` says why (kept with it; None when nobody said)."""
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
            insert = insert_for(conn)
            row = {
                "suite": suite,
                "target": target,
                "run_id": run_id,
                "set_at": self._clock(),
                "reason": reason,
            }
            conn.execute(
                insert(baselines_table)
                .values(row)
                .on_conflict_do_update(
                    index_elements=["suite", "target"],
                    set_={"run_id": run_id, "set_at": row["set_at"], "reason": reason},
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
        """Every pinned baseline: suite, target, run_id, set_at (aware UTC), reason."""
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
        outcome (of its query), error, latency_s, top_score, ids and verdict (None when
        absent). Scores, metrics and the comparison with the baseline are in each run's full
        report (get_report).
        """
        query = history_query(suite, case_id, target, since)
        with self._read() as conn:
            # Stored in time order but for runs stored late: a nearly sorted list.
            rows = sorted(conn.execute(query).all(), key=_by_time)
            shown = self._shown.read(
                {r[6] for r in rows},
                lambda keys: {
                    key: reading.history_view(ranking)
                    for key, ranking in shared_values(conn, rankings, keys).items()
                },
            )
        # A month of one canary is 8,640 rows: every microsecond per row counts, so what
        # latency_of and verdict_of do is written out here.
        history: list[dict[str, Any]] = []
        append = history.append
        for run_id, at, target, run_outcome, micros, seconds, ranking, code in rows:
            outcome, error, top, ids, usual, own = shown[ranking]
            append(
                {
                    "run_id": run_id,
                    "started_at": at,
                    "target": target,
                    "run_outcome": run_outcome,
                    "outcome": outcome,
                    "error": error,
                    "latency_s": (
                        micros / 1e6 if micros is not None else own if seconds is None else seconds
                    ),
                    "top_score": top,
                    "ids": None if ids is None else ids[:],  # each row its own list
                    "verdict": usual if code is None else VERDICTS[code],
                }
            )
        return history

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
        a run without an answered case is absent (one whose cases returned empty lists is
        there, with no ids)."""
        with self._read() as conn:
            return reading.returned_ids(conn, suite, list(run_ids))

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

    def prune(
        self,
        now: datetime,
        keep: timedelta,
        keep_failed: timedelta,
        *,
        write: Callable[[Callable[[], int]], int] = _at_once,
    ) -> int:
        """Delete runs older than ``keep`` and what only they held; how many runs went.

        Regressed and unavailable runs are kept for ``keep_failed`` (at least ``keep``); a run
        pinned as a baseline is never deleted. Every write is a short transaction of its own
        (``PRUNE_BATCH`` runs, or ``VALUES_BATCH`` shared values) run through ``write``: the
        daemon passes its writes thread, so a run being stored waits for one of them at
        most. Finding the shared values nothing refers to is a read, in the calling thread.
        """
        now = aware(now, "now")
        failed = runs.c.outcome.in_(FAILED_OUTCOMES)
        expired = or_(
            and_(~failed, runs.c.started_at < now - keep),
            and_(failed, runs.c.started_at < now - max(keep, keep_failed)),
        )
        batch = (
            select(runs.c.run_id, runs.c.run_key, runs.c.suite)
            .where(expired, runs.c.run_id.not_in(select(baselines_table.c.run_id)))
            .order_by(runs.c.started_at)
            .limit(self._prune_batch)
        )

        def old_claims() -> int:
            with self._write() as conn:
                conn.execute(delete(claims).where(claims.c.tick < now - keep))
            return 0

        def some_runs() -> int:
            with self._write() as conn:
                return delete_runs(conn, batch)

        write(old_claims)
        deleted = 0
        while (count := write(some_runs)) > 0:
            deleted += count
            if count < self._prune_batch:
                break
        while True:  # again while deleting rankings frees those they were compressed against
            with self._read() as conn:
                found = find_unreferenced(conn, now - keep)
            if not found.rankings and not found.parts:
                return deleted
            for table, keys in ((rankings, found.rankings), (run_parts, found.parts)):
                for start in range(0, len(keys), VALUES_BATCH):
                    chunk = keys[start : start + VALUES_BATCH]
                    write(partial(self._delete_values, table, chunk, found))

    def _delete_values(self, table: Table, keys: Sequence[int], found: Unreferenced) -> int:
        with self._write() as conn:
            return delete_values(conn, table, keys, found)

    def ping(self) -> None:
        """Raise StorageUnavailable when the database cannot be reached."""
        with self._read() as conn:
            conn.execute(text("SELECT 1"))

    def check_write(self) -> None:
        """Raise StorageUnavailable unless a new row commits now (call ``migrate`` first).

        Reachable is not enough: a read-only file or a database in recovery answers reads and
        refuses every run. So the check writes what a run writes, a new row of ``runs``, and
        deletes it in the same transaction: nobody ever sees it and the database does not
        grow, but the commit writes the pages a run's would. (An UPDATE that leaves a row as
        it was is no check: SQLite skips an unchanged cell and then writes nothing at all, so
        it committed on a full disk that refused every run.)
        """
        probe = {
            "run_id": f"{_PROBE_PREFIX}{uuid.uuid4().hex}",
            "suite": _PROBE_PREFIX,
            "target": _PROBE_PREFIX,
            "started_at": self._clock(),
            "outcome": "write-check",
            "report": {},
        }
        with self._write() as conn:
            conn.execute(runs.insert().values(probe))
            conn.execute(delete(runs).where(runs.c.run_id == probe["run_id"]))

    def forget(self) -> None:
        """Forget what this store remembers of the rankings it read (``store.remembered``), as
        a store just opened knows nothing: the next reads decode them again."""
        self._shown = Remembered(HISTORY_VIEWS)
        self._entries = Remembered(CASE_ENTRIES)

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
                conn.execution_options(**{WRITE: True})
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


def _by_time(row: Any) -> tuple[datetime, str]:
    """A history row's place: when its run started, then its run id."""
    return row[1], row[0]


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


def _without(key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}
