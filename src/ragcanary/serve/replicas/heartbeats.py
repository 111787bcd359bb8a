"""A replica's heartbeats, the live replicas it sees, and its turn to claim each job's tick.

The design is the docstring of ``serve.replicas``; ticks are named in ``serve.schedule.grid``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from ragcanary import __version__
from ragcanary.store.keeper import RunKeeper

log = structlog.get_logger("ragcanary")

HEARTBEAT_S = 3.0  # how often a replica says it is alive
DEAD_AFTER_S = 10.0  # a replica not seen this long is no longer given jobs
TAKEOVER_MAX_S = 5.0  # a turn of the preference order, at most


def new_replica_id() -> str:
    """Host, pid and a random suffix: unique even when a restarted pod reuses both."""
    return f"{socket.gethostname()[:80]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


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
