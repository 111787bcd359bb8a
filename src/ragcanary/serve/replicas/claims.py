"""A replica's claims on its jobs' ticks: claiming a tick in turn, adopting a dead one's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from ragcanary.serve.replicas.heartbeats import DEAD_AFTER_S, Replicas, takeover_s
from ragcanary.serve.schedule.grid import tick_of
from ragcanary.serve.schedule.jobs import JobKey, interval_seconds
from ragcanary.serve.schedule.reloading import job_id
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

ORPHAN_SLACK_S = 30.0  # how long past the longest interval a dead replica's claim is re-run


@dataclass(frozen=True)
class Claim:
    """A tick of a job this replica claimed, and the run id it runs it as."""

    job: str
    tick: datetime
    run_id: str
    claimed: bool = True  # False: run while storage was down, claimed when it is stored


async def claim_tick(
    replicas: Replicas,
    keeper: RunKeeper,
    loaded: LoadedConfig,
    key: JobKey,
    trigger: BaseTrigger | None,
    stopping: Callable[[], bool],
) -> Claim | None:
    """The current tick of ``key`` and the run id this replica runs it as, or None when
    another replica took it (this one waits its turn first; ``ragcanary.serve.replicas``).
    """
    suite = loaded.config.suites.get(key.suite)
    if trigger is None or suite is None:
        return None
    tick = tick_of(key.id, trigger, datetime.now(UTC))
    jobs = [job_id(s, t) for s, cfg in loaded.config.suites.items() for t in cfg.targets]
    turn = replicas.turn(key.id, jobs)
    if turn:
        every = suite.every or interval_seconds(suite, tick)
        await asyncio.sleep(turn * takeover_s(every, len(replicas.live)))
        if stopping():
            return None  # a stopping replica leaves the tick to the others
    claim = Claim(key.id, tick, uuid.uuid4().hex)
    if await replicas.claim(key.id, tick, claim.run_id):
        return claim
    if keeper.down and turn == 0:
        # Storage is out of reach: the first in the job's order runs the tick anyway and
        # claims it when its run is stored, so a database outage does not stop the
        # schedule; a run whose tick another replica claimed meanwhile is not stored.
        return replace(claim, claimed=False)
    return None


def orphan_window(loaded: LoadedConfig) -> tuple[datetime, datetime]:
    """When a dead replica's claim must have been made for its tick to be run again: within
    the longest interval of ``loaded`` (and ``ORPHAN_SLACK_S``), and before its death."""
    now = datetime.now(UTC)
    longest = max((interval_seconds(s, now) for s in loaded.config.suites.values()), default=0)
    since = now - timedelta(seconds=longest + ORPHAN_SLACK_S)
    until = now - timedelta(seconds=DEAD_AFTER_S)
    return since, until


async def adopt_tick(
    replicas: Replicas, keeper: RunKeeper, job: str, tick: datetime, dead: str
) -> Claim | None:
    """Take over the claim of the ``dead`` replica on ``tick`` of ``job``; None when another
    replica took it first (or storage did not answer)."""
    claim = Claim(job, tick, uuid.uuid4().hex)
    adopt = keeper.store.adopt_claim
    taken = await keeper.call(adopt, job, tick, dead, replicas.replica_id, claim.run_id)
    return claim if taken else None
