"""The APScheduler trigger of a suite's schedule (``every:`` or ``cron:``), built in one place.

``validate`` and a reload build the very trigger ``serve`` schedules, so a config that
validates is a config the daemon can start.
"""

from __future__ import annotations

from datetime import UTC, datetime

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

DEFAULT_EVERY_S = 300.0
CRON_JITTER_S = 10  # replicas and neighbouring suites do not all hit the target on the minute
_CRON_FIELDS = ("minute", "hour", "day", "month", "day_of_week")


def build_trigger(every: float | None, cron: str | None) -> BaseTrigger:
    """The trigger for ``cron`` (five crontab fields) if set, else for every ``every`` seconds.

    Raises ``ValueError`` saying why when ``cron`` is not an expression that ever fires.
    """
    if cron:
        values = cron.split()
        if len(values) != len(_CRON_FIELDS):
            raise ValueError(f"it has {len(values)} fields, not 5")
        # Not CronTrigger.from_crontab: it takes no jitter on APScheduler 3.11.
        trigger = CronTrigger(
            **dict(zip(_CRON_FIELDS, values, strict=True)), timezone=UTC, jitter=CRON_JITTER_S
        )
        if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
            raise ValueError("it names no date that exists, so it never fires")
        return trigger
    return IntervalTrigger(seconds=every or DEFAULT_EVERY_S, timezone=UTC)
