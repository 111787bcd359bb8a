"""Retrying: the one loop that counts attempts, the policy it applies, and its failure type.

Every call that may be asked again (a target's query, a preset's look-up, an embedding
batch, a pgvector statement) names a ``RetrySettings`` and hands one attempt to
``Retrying.call``; none counts attempts itself. An attempt fails by raising ``QueryFailed``,
whose ``outcome`` decides: one in ``TRANSIENT`` is tried again, after the wait its
``Retry-After`` asked for (capped) or else a doubling backoff, until ``retries`` more
attempts are spent; any other fails the call at once.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from ragcanary.measure.results import Outcome, PathMiss

BACKOFF_BASE_S = 0.2
MAX_RETRY_DELAY_S = 30.0  # a Retry-After of an hour must not stall a canary cycle
# Outcomes of a retriever that was down, slow or overloaded: retried, and "unreachable" to
# `validate --live`. Every other failure says the request does not fit what answered.
TRANSIENT: frozenset[Outcome] = frozenset({"timeout", "connect_error", "http_5xx", "rate_limited"})
# Statuses whose Retry-After says when to ask again (RFC 9110 15.5.20, 15.6.4).
RETRY_AFTER_STATUSES = frozenset({429, 503})
_SECONDS = re.compile(r"\d+(\.\d+)?")

T = TypeVar("T")


class QueryFailed(Exception):
    """One attempt failed; carries the outcome, a reason for people, an optional Retry-After,
    and for an answer that the configured paths did not fit, what they missed (``miss``).

    ``Retrying`` adds how many attempts the call made (``attempts``) and, when it timed them,
    how long the last one took (``latency_s``).
    """

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
        self.attempts = 1
        self.latency_s = 0.0

    @property
    def transient(self) -> bool:
        """Whether asking again may cure it (its outcome is in ``TRANSIENT``)."""
        return self.outcome in TRANSIENT

    @property
    def counted(self) -> str:
        """The reason, and how many attempts failed when there were more than one."""
        if self.attempts == 1:
            return self.reason
        return f"{self.reason} (after {self.attempts} attempts)"


@dataclass(frozen=True)
class RetrySettings:
    """One caller's retry policy: ``retries`` more attempts after a transient failure, each
    after the failure's Retry-After or a backoff that starts near ``backoff_s`` and doubles."""

    retries: int
    backoff_s: float = BACKOFF_BASE_S


class Retrying:
    """Applies one ``RetrySettings``; the only place in ragcanary that counts attempts.

    ``sleep``, ``jitter`` (a number in [0, 1) that spreads each backoff over 0.5x-1.5x) and
    ``clock`` are the caller's, so that its tests wait for nothing. Holds no state between
    calls: one ``Retrying`` serves any number of concurrent calls.
    """

    def __init__(
        self,
        settings: RetrySettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._jitter = jitter
        self._clock = clock

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """What ``attempt()`` returns, asked again while it fails transiently and retries are
        left; else raises the last ``QueryFailed``, with ``attempts`` set. No wait follows
        the last attempt."""
        attempts = 0
        while True:
            attempts += 1
            try:
                return await attempt()
            except QueryFailed as failure:
                failure.attempts = attempts
                if not failure.transient or attempts > self.settings.retries:
                    raise
                await self._sleep(self.delay(attempts - 1, failure))

    async def timed(self, attempt: Callable[[], Awaitable[T]]) -> tuple[T, float]:
        """``call``, with how long the last attempt took, in seconds (on a failure, its
        ``latency_s``): earlier attempts and the waits between them do not count."""

        async def once() -> tuple[T, float]:
            started = self._clock()
            try:
                value = await attempt()
            except QueryFailed as failure:
                failure.latency_s = self._clock() - started
                raise
            return value, self._clock() - started

        return await self.call(once)

    def delay(self, retry: int, failure: QueryFailed) -> float:
        """Seconds before retry number ``retry`` (0 first) after ``failure``: its Retry-After,
        never above ``MAX_RETRY_DELAY_S``, or else the backoff."""
        if failure.retry_after is not None:
            return min(failure.retry_after, MAX_RETRY_DELAY_S)
        return backoff_delay(retry, self._jitter(), self.settings.backoff_s)


def backoff_delay(attempt: int, jitter: float, base: float = BACKOFF_BASE_S) -> float:
    """Seconds before retry ``attempt`` (0 first): doubling from ``base``, spread 0.5x-1.5x by
    ``jitter`` (a number in [0, 1)), never above ``MAX_RETRY_DELAY_S``."""
    return min(base * 2.0**attempt * (0.5 + jitter), MAX_RETRY_DELAY_S)


def status_outcome(code: int) -> Outcome:
    """The outcome of an HTTP answer that is no success: 429 ``rate_limited``, 5xx
    ``http_5xx``, another 4xx ``http_4xx``, anything else ``bad_response``."""
    if code == 429:
        return "rate_limited"
    if 500 <= code < 600:
        return "http_5xx"
    if 400 <= code < 500:
        return "http_4xx"
    return "bad_response"


def retry_after(code: int, header: str | None, now: datetime) -> float | None:
    """The seconds a 429 or 503 answer's ``Retry-After`` header asks to wait; None for other
    statuses, no header or one that cannot be read (the backoff applies then)."""
    if header is None or code not in RETRY_AFTER_STATUSES:
        return None
    return retry_after_seconds(header, now)


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
