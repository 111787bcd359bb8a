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


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``: ``"30s"``, ``"5m"``, ``"1h30m"``, ``"30d"``; plain numbers are seconds.

    Raises ``ValueError`` naming the text when it is not a duration.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError(f"{text!r} is not a duration")
        return float(text)
    s = text.strip().replace(" ", "")
    # A value from ${VAR} expansion is always a string, so "30" must read like 30.
    if _NUMBER.fullmatch(s):
        return float(s)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(s):
        raise ValueError(f"{text!r} is not a duration")
    return total


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
