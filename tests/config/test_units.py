"""Durations and rates as people write them in config files."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.units import (
    MAX_DURATION_S,
    DurationOutOfRange,
    format_duration,
    parse_duration,
    parse_duration_between,
    parse_rate,
)

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("30d", 2_592_000.0),
        ("2w", 1_209_600.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("1.5h", 5400.0),
        (" 10s ", 10.0),
        ("0s", 0.0),
        ("30", 30.0),  # what ${VAR} expansion hands over for a bare number
        ("2.5", 2.5),
        (45, 45.0),
        (0.25, 0.25),
    ],
)
def test_duration_reads_units_and_plain_seconds(text: str | float, seconds: float) -> None:
    """Every unit, combinations of them, and plain numbers (seconds) parse to seconds."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["5 minutes", "", "s", "5x", "-5s", "5m-", "1h:30m", "5M", -1, math.nan, math.inf, True, None],
)
def test_duration_rejects_anything_else_naming_it(text: object) -> None:
    """A non-duration raises ValueError whose message quotes what was written."""
    with pytest.raises(ValueError, match="is not a duration") as caught:
        parse_duration(text)  # type: ignore[arg-type]
    assert repr(text) in str(caught.value)


@settings(max_examples=200)
@given(amount=st.integers(min_value=0, max_value=10**6), unit=st.sampled_from(sorted(UNITS)))
def test_duration_rendered_with_any_unit_parses_back(amount: int, unit: str) -> None:
    """N followed by a unit is N times the unit's length in seconds."""
    assert parse_duration(f"{amount}{unit}") == pytest.approx(amount * UNITS[unit])


@settings(max_examples=100)
@given(parts=st.lists(st.tuples(st.integers(0, 999), st.sampled_from(sorted(UNITS))), min_size=1))
def test_duration_of_combined_parts_is_their_sum(parts: list[tuple[int, str]]) -> None:
    """``1h30m``-style combinations add up their parts."""
    text = "".join(f"{amount}{unit}" for amount, unit in parts)
    expected = sum(amount * UNITS[unit] for amount, unit in parts)
    assert parse_duration(text) == pytest.approx(expected)


@settings(max_examples=100)
@given(seconds=st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_duration_of_a_plain_number_is_that_many_seconds(seconds: float) -> None:
    """A number, or its text, is already seconds."""
    text = f"{seconds:.3f}"
    assert parse_duration(seconds) == seconds
    assert parse_duration(text) == float(text)


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("20/s", 20.0),
        ("600/m", 10.0),
        ("1800/h", 0.5),
        ("0.5/s", 0.5),
        ("20 / s", 20.0),
        ("20", 20.0),
        (20, 20.0),
        (0.1, 0.1),
    ],
)
def test_rate_reads_requests_per_unit(text: str | float, per_second: float) -> None:
    """Rates per second, minute or hour, and plain numbers (per second), become per second."""
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize(
    "text", ["fast", "20/min", "20/", "/s", "0/s", "-1/s", 0, -3, math.inf, math.nan, False]
)
def test_rate_rejects_anything_else_naming_it(text: object) -> None:
    """A non-rate, or a rate of zero, raises ValueError quoting what was written."""
    with pytest.raises(ValueError, match="is not a rate") as caught:
        parse_rate(text)  # type: ignore[arg-type]
    assert repr(text) in str(caught.value)


@settings(max_examples=100)
@given(amount=st.integers(min_value=1, max_value=10**6), unit=st.sampled_from(["s", "m", "h"]))
def test_rate_rendered_with_any_unit_parses_back(amount: int, unit: str) -> None:
    """N/unit is N divided by the unit's length in seconds."""
    assert parse_rate(f"{amount}/{unit}") == pytest.approx(amount / UNITS[unit])


@pytest.mark.parametrize(
    ("text", "seconds"), [("1s", 1.0), ("7d", 604800.0), ("3650d", 3650 * 86400.0), (60, 60.0)]
)
def test_duration_between_accepts_the_allowed_range(text: str | int, seconds: float) -> None:
    """The ends of the range are allowed."""
    assert parse_duration_between(text, "since") == seconds


@pytest.mark.parametrize(
    "text", ["999999d", "0s", "500ms", "3651d", "9" * 400, "9" * 400 + "w", 10**400]
)
def test_duration_between_names_the_allowed_range(text: str | int) -> None:
    """Out of range (overflowing ones too) says which range is allowed, never overflows."""
    with pytest.raises(DurationOutOfRange, match="since must be between 1s and 3650d, not "):
        parse_duration_between(text, "since")


def test_duration_between_still_says_when_it_is_no_duration() -> None:
    """A text that is no duration is a plain ValueError, not an out-of-range one."""
    with pytest.raises(ValueError, match="is not a duration") as caught:
        parse_duration_between("a while", "since")
    assert not isinstance(caught.value, DurationOutOfRange)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1.0, "1s"), (0.5, "500ms"), (90.0, "90s"), (7200.0, "2h"), (MAX_DURATION_S, "3650d")],
)
def test_format_duration_is_the_shortest_exact_form(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
