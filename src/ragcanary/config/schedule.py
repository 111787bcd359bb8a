"""The APScheduler trigger of a suite's schedule (``every:`` or ``cron:``), built in one place.

``validate`` and a reload build the very trigger ``serve`` schedules, so a config that
validates is a config the daemon can start.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

DEFAULT_EVERY_S = 300.0
CRON_JITTER_S = 10  # replicas and neighbouring suites do not all hit the target on the minute
_CRON_FIELDS = ("minute", "hour", "day", "month", "day_of_week")
_CRONTAB_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")  # crontab's 0..7
_DAY_TERM = re.compile(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?")


def build_trigger(every: float | None, cron: str | None) -> BaseTrigger:
    """The trigger for ``cron`` (five crontab fields) if set, else for every ``every`` seconds.

    Raises ``ValueError`` saying why when ``cron`` is not an expression that ever fires.
    """
    if cron:
        values = cron.split()
        if len(values) != len(_CRON_FIELDS):
            raise ValueError(f"it has {len(values)} fields, not 5")
        # Not CronTrigger.from_crontab: it takes no jitter on APScheduler 3.11.
        fields = dict(zip(_CRON_FIELDS, values, strict=True))
        fields["day_of_week"] = crontab_weekdays(fields["day_of_week"])
        trigger = CronTrigger(**fields, timezone=UTC, jitter=CRON_JITTER_S)
        if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
            raise ValueError("it names no date that exists, so it never fires")
        return trigger
    return IntervalTrigger(seconds=every or DEFAULT_EVERY_S, timezone=UTC)


def crontab_weekdays(field: str) -> str:
    """Crontab's day-of-week field in APScheduler 3's terms, as day names.

    In crontab 0 and 7 are Sunday and 1 is Monday; APScheduler 3 reads 0 as Monday, so
    ``0 9 * * 1`` would run on Tuesdays. Numbers, ranges and steps become names (``1-5``
    is ``mon,tue,wed,thu,fri``); names and anything else are left for APScheduler to read.
    """
    days: list[str] = []
    for term in field.split(","):
        match = _DAY_TERM.fullmatch(term)
        if match is None or term == "*":
            return field
        start, end, step = match.groups()
        first = 0 if start == "*" else int(start)
        last = 6 if start == "*" else int(end or (7 if step else start))
        if not 0 <= first <= last <= 7 or step == "0":
            return field  # out of range: APScheduler's own message says why
        days += [_CRONTAB_DAYS[day] for day in range(first, last + 1, int(step or 1))]
    return ",".join(dict.fromkeys(days))
