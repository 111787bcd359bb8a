"""Suite schedules: the trigger serve runs, built the same way validate checks it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragcanary.config.schedule import CRON_JITTER_S, build_trigger, crontab_weekdays

TUESDAY = datetime(2026, 11, 24, tzinfo=UTC)


def test_cron_trigger_is_built_with_its_jitter() -> None:
    """from_crontab takes no jitter on APScheduler 3.11; the trigger must carry it anyway."""
    trigger = build_trigger(None, "*/5 * * * *")
    assert isinstance(trigger, CronTrigger)
    assert trigger.jitter == CRON_JITTER_S
    fire = trigger.get_next_fire_time(None, TUESDAY)
    assert fire is not None
    assert timedelta(0) <= fire - TUESDAY <= timedelta(seconds=CRON_JITTER_S)


def test_interval_trigger_defaults_to_five_minutes() -> None:
    trigger = build_trigger(None, None)
    assert isinstance(trigger, IntervalTrigger)
    assert trigger.interval == timedelta(minutes=5)
    assert build_trigger(1.0, None).interval == timedelta(seconds=1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("expression", "weekday"),
    [("0 9 * * 1", "Mon"), ("0 9 * * 0", "Sun"), ("0 9 * * 7", "Sun"), ("0 9 * * 6", "Sat")],
)
def test_cron_weekdays_count_like_crontab(expression: str, weekday: str) -> None:
    """In crontab 1 is Monday and 0 or 7 Sunday; APScheduler 3 alone would shift them a day."""
    fire = build_trigger(None, expression).get_next_fire_time(None, TUESDAY)
    assert fire is not None
    assert fire.strftime("%a") == weekday


@pytest.mark.parametrize(
    ("field", "names"),
    [
        ("*", "*"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("*/2", "sun,tue,thu,sat"),
        ("0,6,7", "sun,sat"),
        ("5-7", "fri,sat,sun"),
        ("mon-fri", "mon-fri"),
        ("8", "8"),  # left for APScheduler to refuse
    ],
)
def test_crontab_weekdays_become_names(field: str, names: str) -> None:
    assert crontab_weekdays(field) == names


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "4 fields, not 5"),
        ("0 0 30 2 *", "never fires"),
        ("61 * * * *", "higher than the maximum"),
        ("0 9 * * 8", "higher than the maximum"),
    ],
)
def test_a_cron_that_cannot_run_is_refused(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_trigger(None, expression)
