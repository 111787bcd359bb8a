"""Replicas' heartbeats and tick claims on one shared PostgreSQL database: ``Store``'s SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Connection, delete, select, text, update
from sqlalchemy.dialects import postgresql

from ragcanary.measure.run_report import RunReport
from ragcanary.store.engine import insert_for
from ragcanary.store.errors import StorageError
from ragcanary.store.queries import aware
from ragcanary.store.schema import claims, replicas, runs

CLAIM_LOCK_TIMEOUT_MS = 1000
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a lock_timeout
FORGET_REPLICAS = timedelta(days=1)  # a replica not seen this long leaves the replicas table


class _Transactions(Protocol):
    """What the methods below use of ``Store``."""

    _clock: Callable[[], datetime]

    def _read(self) -> AbstractContextManager[Connection]: ...

    def _write(self) -> AbstractContextManager[Connection]: ...


class ClaimsMixin:
    """``Store``'s methods for replicas: heartbeats, and claims of the ticks of jobs."""

    def heartbeat(
        self: _Transactions, replica_id: str, started_at: datetime, config_hash: str, version: str
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
            insert = insert_for(conn)
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

    def claim(self: _Transactions, job: str, tick: datetime, replica_id: str, run_id: str) -> bool:
        """Take the ``tick`` of ``job`` for ``replica_id``; False when another replica has it."""
        row = {
            "job": job,
            "tick": aware(tick, "tick"),
            "replica_id": replica_id,
            "run_id": run_id,
            "claimed_at": self._clock(),
        }
        try:
            with self._write() as conn:
                insert = insert_for(conn)
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
        self: _Transactions, live: Iterable[str], since: datetime, until: datetime
    ) -> list[tuple[str, datetime, str]]:
        """Ticks claimed between ``since`` and ``until`` by a replica not in ``live`` whose run
        was never stored (it died in the middle): job, tick and the dead claimant. When it was
        claimed, not the tick, says how long ago it ran: a job fires up to an interval after
        the grid point that names its tick (``serve.schedule.grid``)."""
        query = select(claims.c.job, claims.c.tick, claims.c.replica_id).where(
            claims.c.claimed_at >= aware(since, "since"),
            claims.c.claimed_at <= aware(until, "until"),
            claims.c.replica_id.not_in(list(live)),
            ~_CLAIMED_RUN_STORED,
        )
        with self._read() as conn:
            return [(r.job, r.tick, r.replica_id) for r in conn.execute(query)]

    def adopt_claim(
        self: _Transactions, job: str, tick: datetime, dead: str, replica_id: str, run_id: str
    ) -> bool:
        """Take over ``dead``'s claim of ``tick`` to run it again; False if another did, or
        if its run was stored after all (a replica cut off, not dead, storing it late).

        The claim's row is locked first, as ``save_run`` locks it before storing a claimed
        run: a save in progress finishes before the check for a stored run, which as a new
        statement sees what that save committed. Checked in one statement alone, a run being
        stored was not there yet, and the tick got a second run. A row locked by a session
        that hangs (a replica cut off mid-save) is given up after a short wait.
        """
        theirs = (claims.c.job == job, claims.c.tick == aware(tick, "tick"))
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


def taken_over(conn: Connection, report: RunReport) -> bool:
    """Whether the tick ``report``'s run claimed now belongs to another run.

    A run made while storage was down (``claimed`` false) claims its tick here, in the
    transaction that stores it: when another replica claimed the tick meanwhile, it is out.
    The claim's row stays locked until the run is stored, so an adoption (``adopt_claim``)
    waits for it and then finds the run.
    """
    claim = report.claim
    if claim is None or conn.dialect.name != "postgresql":
        return False
    try:
        tick = datetime.fromisoformat(claim.tick)
    except ValueError:
        return False
    if not claim.claimed:
        row = {
            "job": claim.job,
            "tick": tick,
            "replica_id": claim.replica,
            "run_id": report.run_id,
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
        .where(claims.c.job == claim.job, claims.c.tick == tick)
        .with_for_update()
    ).scalar_one_or_none()
    return owner is not None and owner != report.run_id
