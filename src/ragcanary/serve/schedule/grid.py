"""A job's grid of ticks, named alike by every replica, and the trigger firing it at its phase."""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragcanary.config.schedule import CRON_JITTER_S

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLY_US = 50_000  # a fire this early (a clock step) still belongs to its tick


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
