"""Parsing of the human units in config files: durations (``30s``, ``1h30m``), rates (``20/s``)."""

from __future__ import annotations

import math
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*(s|m|h)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

DURATION_HINT = "write it like 500ms, 30s, 5m, 1h or 30d"
RATE_HINT = "write it like 20/s, 600/m or 1000/h"
# Ten years: the longest duration anything takes, so that now ± it is always a valid datetime
# (timedelta and datetime overflow a little past 2.7 million days).
MAX_DURATION_S = 3650 * 86400.0


class DurationOutOfRange(ValueError):
    """A duration that parses but lies outside what its setting allows."""


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``: ``"30s"``, ``"5m"``, ``"1h30m"``, ``"30d"``; plain numbers are seconds.

    Raises ``ValueError`` naming the text when it is not a duration.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, int | float):
        if (isinstance(text, float) and not math.isfinite(text)) or text < 0:
            raise ValueError(f"{text!r} is not a duration")
        try:
            return float(text)
        except OverflowError:  # an int of hundreds of digits
            raise DurationOutOfRange(f"{text!r} is longer than any duration can be") from None
    s = text.strip().replace(" ", "")
    # A value from ${VAR} expansion is always a string, so "30" must read like 30.
    total = float(s) if _NUMBER.fullmatch(s) else _sum_of_parts(s, text)
    if not math.isfinite(total):  # "1e400" digits, or a thousand-digit count of weeks
        raise DurationOutOfRange(f"{text!r} is longer than any duration can be")
    return total


def _sum_of_parts(s: str, text: str) -> float:
    """The seconds of ``1h30m``-like ``s``; ``text`` is what the user wrote, for the error."""
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(s):
        raise ValueError(f"{text!r} is not a duration")
    return total


def parse_duration_between(
    text: str | float | int, name: str, low: float = 1.0, high: float = MAX_DURATION_S
) -> float:
    """Seconds in ``text``, which must lie between ``low`` and ``high`` seconds.

    Raises ``DurationOutOfRange`` like ``since must be between 1s and 3650d, not '999999d'``
    when it is out of range, and ``ValueError`` when it is no duration at all.
    """
    try:
        seconds = parse_duration(text)
    except DurationOutOfRange:
        seconds = math.inf
    if not low <= seconds <= high:
        allowed = f"between {format_duration(low)} and {format_duration(high)}"
        shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
        raise DurationOutOfRange(f"{name} must be {allowed}, not {shown}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest of ``3650d``, ``2h``, ``90s``, ``500ms`` that is exactly ``seconds``."""
    for unit in ("w", "d", "h", "m", "s"):
        count = seconds / _SECONDS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds * 1000:g}ms"


def parse_rate(text: str | float | int) -> float:
    """Requests per second in ``text``: ``"20/s"``, ``"600/m"``; a plain number is per second.

    Raises ``ValueError`` naming the text when it is not a rate above 0.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"{text!r} is not a rate")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text <= 0:
            raise ValueError(f"{text!r} is not a rate (it must be above 0)")
        return float(text)
    s = text.strip()
    if _NUMBER.fullmatch(s):
        s += "/s"
    match = _RATE.fullmatch(s)
    if not match:
        raise ValueError(f"{text!r} is not a rate")
    if float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a rate (it must be above 0)")
    return float(match.group(1)) / _SECONDS[match.group(2)]
