"""A failed attempt (``QueryFailed``), which failures are retried, and after how long."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ragcanary.measure.results import Outcome, PathMiss

BACKOFF_BASE_S = 0.2
MAX_RETRY_DELAY_S = 30.0  # a Retry-After of an hour must not stall a canary cycle
# Outcomes of a retriever that was down, slow or overloaded: retried, and "unreachable" to
# `validate --live`. Every other failure says the request does not fit what answered.
TRANSIENT: frozenset[Outcome] = frozenset({"timeout", "connect_error", "http_5xx", "rate_limited"})
_SECONDS = re.compile(r"\d+(\.\d+)?")


def retry_after_seconds(value: str, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or HTTP date); None if unreadable."""
    value = value.strip()
    if _SECONDS.fullmatch(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def backoff_delay(attempt: int, jitter: float, base: float = BACKOFF_BASE_S) -> float:
    """Seconds before retry ``attempt`` (0 first): doubling from ``base``, spread 0.5x-1.5x by
    ``jitter`` (a number in [0, 1)), never above ``MAX_RETRY_DELAY_S``."""
    return min(base * 2.0**attempt * (0.5 + jitter), MAX_RETRY_DELAY_S)


class QueryFailed(Exception):
    """One attempt failed; carries the outcome, a reason for people, an optional Retry-After,
    and for an answer that the configured paths did not fit, what they missed (``miss``)."""

    def __init__(
        self,
        outcome: Outcome,
        reason: str,
        retry_after: float | None = None,
        *,
        miss: PathMiss | None = None,
    ) -> None:
        super().__init__(reason)
        self.outcome: Outcome = outcome
        self.reason = reason
        self.retry_after = retry_after
        self.miss = miss
