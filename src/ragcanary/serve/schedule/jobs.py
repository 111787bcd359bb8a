"""The daemon's schedule: one job per (suite, target), first runs spread over their interval."""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragcanary.config.model import SuiteConfig
from ragcanary.config.schedule import build_trigger
from ragcanary.serve.schedule.grid import grid_trigger
from ragcanary.serve.schedule.reloading import job_id
from ragcanary.suites.loaded import LoadedConfig

# A job's first run comes at its own moment of its first interval, which spreads jobs of the
# same interval evenly over it instead of starting them together and probing in bursts: at
# 200 jobs every minute, jobs started within 30 s kept the event loop saturated for half of
# every minute, and scrapes waited behind it (docs/performance.md, "Scale of one daemon").
# Capped so a long interval does not leave a fresh daemon idle for minutes.
MAX_START_JITTER_S = 60.0
GOLDEN_STEP = (5**0.5 - 1) / 2
PRUNE_EVERY_S = 3600.0
PRUNE = "prune"  # the pruning job's id; every other job's is ``suite/target``

# Fire times a cron schedule's interval is the median gap of: a day of */5, a month of daily.
CRON_SAMPLES = 31


def interval_seconds(suite: SuiteConfig, now: datetime) -> float:
    """Seconds between two runs of the suite; for cron, the median gap of its next fire times.

    The median, not the mean, so that "weekdays at 9" reads as a day, not a day and a half.
    """
    if not suite.cron:
        return suite.every or 300.0
    trigger = CronTrigger.from_crontab(suite.cron, timezone=UTC)  # no jitter: the plan itself
    times: list[datetime] = []
    previous: datetime | None = None
    at: datetime | None = now
    while at is not None and len(times) < CRON_SAMPLES + 1:
        at = trigger.get_next_fire_time(previous, at)
        if at is not None:
            times.append(at)
            previous, at = at, at + timedelta(microseconds=1)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else 300.0


Snapshot = list[tuple[str, BaseTrigger, datetime | None]]  # (job id, trigger, next run)


@dataclass(frozen=True)
class JobKey:
    suite: str
    target: str

    @property
    def id(self) -> str:
        return job_id(self.suite, self.target)

    @classmethod
    def of(cls, job: str) -> JobKey:
        """The key of the job whose id is ``job`` (``suite/target``)."""
        suite, _, target = job.partition("/")
        return cls(suite, target)


def trigger_for(suite: SuiteConfig) -> BaseTrigger:
    """The trigger of ``suite``'s schedule: the one ``validate`` built when it checked it."""
    return build_trigger(suite.every, suite.cron)


def grid_phases(loaded: LoadedConfig) -> dict[str, float]:
    """Where in its interval each ``every:`` job of ``loaded`` fires on a grid (0 to 1), the
    same on every replica with this config: n jobs exactly 1/n of an interval apart.

    In the order of their ids, the jobs take golden-ratio steps round the interval, and each
    job fires at its step's rank among them: jobs next to each other by id (one suite's
    targets) fire far apart. The steps alone are uneven by up to 2 jobs in a twelfth of the
    interval, depending on where it is taken to begin; the grid is fixed to the clock, so
    that would come and go with the time of day.
    """
    jobs = sorted(
        job_id(name, target)
        for name, suite in loaded.config.suites.items()
        if suite.every is not None
        for target in suite.targets
    )
    steps = sorted(range(len(jobs)), key=lambda index: (index * GOLDEN_STEP) % 1.0)
    return {jobs[index]: rank / len(jobs) for rank, index in enumerate(steps)}


def job_triggers(loaded: LoadedConfig) -> dict[str, BaseTrigger]:
    """The trigger of every job of ``loaded``, built before the scheduler is touched."""
    return {
        job_id(name, target): trigger_for(suite)
        for name, suite in loaded.config.suites.items()
        for target in suite.targets
    }


class Jobs:
    """The scheduler's jobs: each (suite, target) pair's runs, and the hourly pruning.

    ``run`` is called with a job's key at each of its times. On a grid (replicas) every
    interval job fires at its phase (``grid_phases``), alike on every replica; otherwise each
    job's first run lies its own way into its first interval.
    """

    def __init__(
        self,
        run: Callable[[JobKey], Awaitable[None]],
        *,
        rng: random.Random,
        on_grid: bool,
    ) -> None:
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self._run = run
        self._on_grid = on_grid
        self._phase = rng.random()  # where the next job's first run falls in its interval
        self._grid: tuple[LoadedConfig | None, dict[str, float]] = (None, {})

    def schedule_all(self, loaded: LoadedConfig, prune: Callable[[], Awaitable[None]]) -> None:
        """At start: the pruning job and one job per (suite, target)."""
        self.scheduler.remove_all_jobs()
        now = datetime.now(UTC)
        self.scheduler.add_job(
            prune,
            IntervalTrigger(seconds=PRUNE_EVERY_S, timezone=UTC),
            id=PRUNE,
            max_instances=1,
            coalesce=True,
            next_run_time=now + timedelta(seconds=60),
        )
        for suite_name, suite in loaded.config.suites.items():
            for target in suite.targets:
                self.add(JobKey(suite_name, target), loaded, trigger_for(suite), now)

    def add(self, key: JobKey, loaded: LoadedConfig, trigger: BaseTrigger, now: datetime) -> None:
        """Schedule ``key`` of ``loaded`` afresh: its first run its own moment into its first
        interval."""
        suite = loaded.config.suites[key.suite]
        if self._on_grid:
            if suite.every is not None:
                trigger = grid_trigger(suite.every, self._phases(loaded)[key.id])
            self._schedule(key, trigger, trigger.get_next_fire_time(None, now))
            return
        # Each job's phase is a golden-ratio step from the last: any number of jobs lie evenly
        # over the interval, where independent random phases leave clumps and gaps.
        self._phase = (self._phase + GOLDEN_STEP) % 1.0
        jitter = self._phase * min(suite.every or 60.0, MAX_START_JITTER_S)
        self._schedule(key, trigger, now + timedelta(seconds=jitter))

    def _phases(self, loaded: LoadedConfig) -> dict[str, float]:
        """``grid_phases(loaded)``, worked out once per config rather than once per job."""
        if self._grid[0] is not loaded:
            self._grid = (loaded, grid_phases(loaded))
        return self._grid[1]

    def remove(self, job: str) -> None:
        self.scheduler.remove_job(job)

    def trigger(self, key: JobKey) -> BaseTrigger | None:
        """``key``'s trigger; None once a reload removed its job."""
        job = self.scheduler.get_job(key.id)
        return None if job is None else job.trigger

    def snapshot(self) -> Snapshot:
        """The pairs' jobs as they are, for ``restore``."""
        return [
            (job.id, job.trigger, job.next_run_time)
            for job in self.scheduler.get_jobs()
            if job.id != PRUNE
        ]

    def restore(self, jobs: Snapshot) -> None:
        """Put the pairs' jobs back as ``snapshot`` saw them."""
        for job in self.scheduler.get_jobs():
            if job.id != PRUNE:
                job.remove()
        for job, trigger, next_run in jobs:
            self._schedule(JobKey.of(job), trigger, next_run)

    def next_runs(self, running: Mapping[str, asyncio.Task[None]]) -> list[dict[str, Any]]:
        """The schedule as the API shows it; ``running`` holds the runs in flight by job id."""
        jobs = []
        for job in self.scheduler.get_jobs():
            if job.id == PRUNE:
                continue
            key = JobKey.of(job.id)
            next_run = job.next_run_time
            jobs.append(
                {
                    "suite": key.suite,
                    "target": key.target,
                    "trigger": str(job.trigger),
                    "next_run_at": next_run.isoformat() if next_run else None,
                    "running": job.id in running and not running[job.id].done(),
                }
            )
        return jobs

    def _schedule(self, key: JobKey, trigger: BaseTrigger, next_run: datetime | None) -> None:
        self.scheduler.add_job(
            self._run,
            trigger,
            args=[key],
            id=key.id,
            name=key.id,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=next_run,
            replace_existing=True,
        )
