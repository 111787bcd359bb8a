"""What every config section is made of: strict models and the validated units of its fields."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.problems import show
from ragcanary.config.units import (
    DURATION_HINT,
    MAX_DURATION_S,
    RATE_HINT,
    DurationOutOfRange,
    format_duration,
    parse_duration,
    parse_rate,
)


class Strict(BaseModel):
    """A config section: an unknown key is an error, and a loaded config never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def quote_value(value: Any) -> str:
    """A value as a validator's message names it: scalars whole, containers by their kind.

    Not shortened like ``show`` does: a message is redacted after it is built, and a
    secret cut in half by shortening would no longer be recognised.
    """
    return show(value) if isinstance(value, dict | list) or value is None else repr(value)


def _duration(value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except DurationOutOfRange:
        seconds = math.inf  # reported below, with the longest allowed
    except ValueError:
        raise _fix(f"{quote_value(value)} is not a duration", DURATION_HINT) from None
    if seconds <= 0:  # no timeout or interval of ours can be zero
        raise _fix(f"{value!r} is not a duration above 0", DURATION_HINT)
    if seconds > MAX_DURATION_S:  # timedelta and datetime arithmetic would overflow
        longest = format_duration(MAX_DURATION_S)
        raise _fix(f"{quote_value(value)} is longer than {longest}", f"write {longest} or less")
    return seconds


MIN_INTERVAL_S = 1.0  # intervals are at least 1 s (docs/config.md, suites.NAME.every)


def _interval(value: Any) -> float:
    seconds = _duration(value)
    if seconds < MIN_INTERVAL_S:
        raise _fix(
            f"{quote_value(value)} is shorter than {format_duration(MIN_INTERVAL_S)}",
            "write an interval of at least 1s, like 30s or 5m",
        )
    return seconds


def _rate(value: Any) -> float:
    try:
        return parse_rate(value)
    except ValueError as exc:
        scalar = isinstance(value, str | int | float)
        raise _fix(
            str(exc) if scalar else f"{quote_value(value)} is not a rate", RATE_HINT
        ) from None


EVERY_PEER = "*"


def proxy_network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The network an entry of ``forwarded_allow_ips`` names (an address is a network of one),
    None for ``*`` (every peer); ``ValueError`` when it is neither."""
    if entry == EVERY_PEER:
        return None
    return ipaddress.ip_network(entry, strict=False)


def _proxies(value: Any) -> Any:
    # A list, or one string of them as uvicorn's --forwarded-allow-ips takes: "10.0.0.0/8, ::1".
    entries = value.split(",") if isinstance(value, str) else value
    if not isinstance(entries, list):
        return entries  # the list type says what is wrong
    for entry in entries:
        try:
            proxy_network(entry.strip() if isinstance(entry, str) else entry)
        except (ValueError, TypeError):
            raise _fix(
                f"{quote_value(entry)} is not an IP address or network",
                "write addresses (10.0.0.7), networks (10.0.0.0/8, fd00::/8), or * to believe "
                "every peer",
            ) from None
    return [e.strip() if isinstance(e, str) else e for e in entries]


Seconds = Annotated[float, BeforeValidator(_duration)]
Interval = Annotated[float, BeforeValidator(_interval)]
PerSecond = Annotated[float, BeforeValidator(_rate)]
Proxies = Annotated[list[str], BeforeValidator(_proxies)]  # see proxy_network
Floor = Annotated[float, Field(ge=0, le=1)]
Floors = dict[Annotated[int, Field(gt=0)], Floor]  # k -> lowest acceptable value


# A DNS name: labels of letters, digits, "-" and "_" (Kubernetes Services may use none else).
_HOST_NAME = re.compile(
    r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
HOST_HINT = (
    "write a host name like ragcanary.example.com, .svc.cluster.local for every name under "
    "it, an IP address, or * for any host; no scheme, port or path"
)


def _host_pattern(value: Any) -> str:
    """An ``allowed_hosts:`` entry in the form requests are compared with: lower case, no
    trailing dot, an IP address in its short form without brackets."""
    if not isinstance(value, str):
        raise _fix(f"{quote_value(value)} is not a host name", HOST_HINT)
    entry = value.strip().lower().rstrip(".")
    if entry == "*":
        return entry
    try:
        return str(ipaddress.ip_address(entry.removeprefix("[").removesuffix("]")))
    except ValueError:
        pass
    if len(entry) > 253 or not _HOST_NAME.fullmatch(entry.removeprefix(".")):
        raise _fix(f"{value!r} is not a host name", HOST_HINT)
    return entry


HostPattern = Annotated[str, BeforeValidator(_host_pattern)]
