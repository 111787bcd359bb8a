"""Replicas of `ragcanary serve` on one PostgreSQL database: each scheduled tick runs once.

Every replica names a job's ticks alike: the points of a grid hashed from the job's name
(``grid_offset_s``), whatever moment of each grid interval it fires the job at (``tick_of``).
Replicas with one config fire each job at the same moment, its phase, and the phases of all
jobs lie evenly over their interval (``serve.schedule.jobs.grid_phases``).

Before running a tick a replica claims it: a row keyed by (job, tick) that only one INSERT
can create (``Store.claim``), whichever replicas try and in whatever order. That key alone
makes a tick run at most once; nothing else has to be right for that.

Who tries first only decides who usually wins. Replicas write a heartbeat row every few
seconds; those seen lately are alive. Each job has a preference order over the live
replicas: the jobs, sorted, are dealt round-robin to the replicas, sorted, and the others
follow in turn. The first replica in the order claims at the tick; the n-th waits n turns
(``takeover_s``) first. So the work is spread evenly while all are alive, and when the first
is dead, cut off from the database or late, the next claims the tick a turn later: failover
takes a turn, not a heartbeat timeout. A replica that cannot reach the database cannot claim
and runs nothing (it could not store the run); its runs finished before the cut are written,
once, when it reconnects. A replica killed in the middle of a run loses that one tick.
"""

from __future__ import annotations

import copy
import hashlib
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragcanary import __version__
from ragcanary.config.schedule import CRON_JITTER_S
from ragcanary.store.keeper import RunKeeper

log = structlog.get_logger("ragcanary")

HEARTBEAT_S = 3.0  # how often a replica says it is alive
DEAD_AFTER_S = 10.0  # a replica not seen this long is no longer given jobs
TAKEOVER_MAX_S = 5.0  # a turn of the preference order, at most
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLY_US = 50_000  # a fire this early (a clock step) still belongs to its tick


def new_replica_id() -> str:
    """Host, pid and a random suffix: unique even when a restarted pod reuses both."""
    return f"{socket.gethostname()[:80]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def grid_offset_s(job: str, every_s: float) -> float:
    """Where in each interval ``job``'s ticks lie: the same on every replica and version.

    Only names ticks. Until 2026-11 jobs also fired there; hashed moments bunch up (200 jobs
    every minute, up to 9 in one second), so jobs now fire at their phase instead.
    """
    digest = hashlib.blake2b(job.encode("utf-8"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % max(1, round(every_s * 1000))) / 1000


def grid_trigger(every_s: float, phase: float) -> IntervalTrigger:
    """Every ``every_s`` seconds, ``phase`` (0 to 1) of an interval past its multiples since
    1970: the same fire times on every replica given the same phase."""
    start = EPOCH + timedelta(microseconds=round(phase * every_s * 1_000_000))
    return IntervalTrigger(seconds=every_s, start_date=start, timezone=UTC)


def tick_of(job: str, trigger: BaseTrigger, now: datetime) -> datetime:
    """The tick that the firing of ``job``'s ``trigger`` handled at ``now`` runs, as every
    replica names it: for an interval, the point of the job's grid (``grid_offset_s``) at or
    before the firing's own time, so replicas that fire the job at other moments of the same
    grid interval (another config, another version) still name one tick; for a cron, its fire
    time before jitter."""
    if isinstance(trigger, IntervalTrigger):
        every_us = round(trigger.interval.total_seconds() * 1_000_000)
        fired = _at_or_before(trigger.start_date, every_us, now, _EARLY_US)
        grid = EPOCH + timedelta(seconds=grid_offset_s(job, every_us / 1_000_000))
        return _at_or_before(grid, every_us, fired, 0)
    if isinstance(trigger, CronTrigger):
        return _latest_fire(trigger, now)
    raise TypeError(f"no ticks for {type(trigger).__name__}")


def _at_or_before(start: datetime, every_us: int, moment: datetime, early_us: int) -> datetime:
    """The point of the grid ``start + k * every_us`` at or before ``moment`` (or at most
    ``early_us`` after it: a clock a hair early still names the coming point)."""
    since_us = (moment - start) // timedelta(microseconds=1)
    return start + timedelta(microseconds=(since_us + early_us) // every_us * every_us)


def _latest_fire(trigger: CronTrigger, now: datetime) -> datetime:
    """The cron's latest fire time before jitter at or before ``now`` (jitter only delays)."""
    nominal = copy.copy(trigger)
    nominal.jitter = None
    for back in (CRON_JITTER_S + 1, 3600, 86400, 31 * 86400):
        fire: datetime | None = nominal.get_next_fire_time(None, now - timedelta(seconds=back))
        if fire is not None and fire <= now:
            while (later := nominal.get_next_fire_time(fire, fire + _STEP)) and later <= now:
                fire = later
            return fire
    return now


_STEP = timedelta(microseconds=1)


@dataclass(frozen=True)
class Peer:
    replica_id: str
    seen_at: datetime
    config_hash: str


class Replicas:
    """This replica's view of the others, and its claims of the ticks it runs."""

    def __init__(self, keeper: RunKeeper, config_hash: str, replica_id: str | None = None):
        self.keeper = keeper
        self.replica_id = replica_id or new_replica_id()
        self.config_hash = config_hash
        self.started_at = datetime.now(UTC)
        self.live: tuple[str, ...] = (self.replica_id,)
        self._differing: frozenset[str] = frozenset()

    async def beat(self, now: datetime | None = None) -> bool:
        """Write this replica's heartbeat and read the others'; False when storage is down."""
        rows = await self.keeper.call(
            self.keeper.store.heartbeat,
            self.replica_id,
            self.started_at,
            self.config_hash,
            __version__,
        )
        if rows is None:
            return False
        self.update([Peer(r["replica_id"], r["seen_at"], r["config_hash"]) for r in rows], now)
        return True

    def update(self, peers: Sequence[Peer], now: datetime | None = None) -> None:
        """Take the replicas seen within ``DEAD_AFTER_S`` as the live ones (this one always)."""
        now = now or datetime.now(UTC)
        alive = [p for p in peers if (now - p.seen_at).total_seconds() <= DEAD_AFTER_S]
        live = {p.replica_id for p in alive} | {self.replica_id}
        if tuple(sorted(live)) != self.live:
            log.info("replicas changed", replicas=sorted(live), this=self.replica_id)
        self.live = tuple(sorted(live))
        differing = frozenset(p.replica_id for p in alive if p.config_hash != self.config_hash)
        if differing and differing != self._differing:
            log.warning(
                "other replicas run another configuration; roll out one config to all",
                replicas=sorted(differing),
                config_hash=self.config_hash,
            )
        self._differing = differing

    def turn(self, job: str, jobs: Sequence[str]) -> int:
        """This replica's place in ``job``'s preference order: 0 claims at once."""
        ordered = sorted(jobs)
        index = ordered.index(job) if job in ordered else 0
        first = index % len(self.live)
        return (self.live.index(self.replica_id) - first) % len(self.live)

    async def claim(self, job: str, tick: datetime, run_id: str) -> bool:
        """Whether this replica got ``tick`` of ``job`` (False too while storage is down)."""
        taken: Any = await self.keeper.call(
            self.keeper.store.claim, job, tick, self.replica_id, run_id
        )
        return bool(taken)


def takeover_s(every_s: float, replicas: int) -> float:
    """One turn of the preference order for a job run every ``every_s`` seconds: all the
    turns of ``replicas`` fit in half an interval, so the last is done before the next tick."""
    return min(TAKEOVER_MAX_S, every_s / (2 * max(replicas, 2)))
