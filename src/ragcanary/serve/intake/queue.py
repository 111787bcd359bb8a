"""Failure reports from the application (``POST /api/v1/candidates``): limited, checked, queued.

The route is called from a production application's request path, so it never waits for the
database. A report's client is rate-limited first, before its body is even parsed, so that a
client over its limit costs nothing; the client is the peer's address, or the one a trusted
proxy forwarded (``serve.intake.forwarded``), never what the body says. Then the report is checked
against its bounds and personal data is redacted out of it (``serve.intake.reportcheck``), in
linear time, a large one in a thread of the intake's own; and it joins a queue bounded in
count and in bytes that a background task writes in batches (``Intake.flush``). What cannot
be taken is refused with its reason and counted in ``ragcanary_candidates_dropped_total``.
"""

from __future__ import annotations

import json
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from ragcanary.serve.intake.forwarded import TrustedProxies
from ragcanary.serve.intake.pii import DEFAULT_REDACTIONS, Redactor
from ragcanary.serve.intake.reportcheck import (
    MAX_IDS,
    MAX_QUERY_CHARS,
    SIGNALS,
    check,
    normalised,
    query_key,
)
from ragcanary.serve.service import Refused
from ragcanary.store.candidates import Added, CandidateStore, FailureReport
from ragcanary.store.errors import StorageError
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.threads import run_in

__all__ = [
    "DEFAULT_REDACTIONS",
    "MAX_IDS",
    "MAX_QUERY_CHARS",
    "SIGNALS",
    "Intake",
    "IntakeSettings",
    "Recount",
    "Redactor",
    "SourceLimiter",
    "check",
    "footprint",
    "intake_settings",
    "normalised",
    "query_key",
]

log = structlog.get_logger("ragcanary")

MAX_QUEUED = 10_000  # reports waiting for the database; more are refused (503)
# ... and the memory they may hold. The largest report holds about 64 KiB (100 ids of 512
# characters), so 10,000 of them once took 611 MiB, over the 512 Mi a pod may use
# (deploy/kubernetes); 64 MiB is about 1,000 of the largest, and 10,000 of a few hundred bytes.
MAX_QUEUED_BYTES = 64 * 1024 * 1024
MAX_SOURCES = 10_000  # rate-limit buckets kept; the least recently seen go first
# A body up to this size is checked on the event loop: at most about 0.3 ms even when all
# digits, less than handing it to a thread and back costs on a busy machine. A larger one
# (up to the 1 MB cap) is checked in the intake's thread, where the loop gets the interpreter
# back every switch interval.
INLINE_BYTES = 8_192


class SourceLimiter:
    """A token bucket per client address: ``rate`` reports a second, bursts of ``burst``."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, source: str) -> float | None:
        """None when ``source`` may report now, else the seconds until it may."""
        now = self._clock()
        tokens, then = self._buckets.pop(source, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens < 1.0:
            self._buckets[source] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[source] = (tokens - 1.0, now)
        while len(self._buckets) > MAX_SOURCES:
            self._buckets.popitem(last=False)
        return None


@dataclass(frozen=True)
class IntakeSettings:
    max_pending: int
    rate: float
    burst: int
    redactions: tuple[tuple[str, str], ...]
    trusted_proxies: tuple[str, ...] = ()  # forwarded_allow_ips


def intake_settings(loaded: LoadedConfig) -> IntakeSettings:
    """The failure reports' bounds and redactions, from the config's ``candidates:``, and the
    proxies whose X-Forwarded-For names the client (``forwarded_allow_ips``)."""
    config = loaded.config.candidates
    redactions = (
        DEFAULT_REDACTIONS
        if config.redact is None
        else tuple((r.pattern, r.replace) for r in config.redact)
    )
    return IntakeSettings(
        config.max_pending,
        config.rate_limit,
        config.burst,
        redactions,
        tuple(loaded.config.forwarded_allow_ips),
    )


def footprint(report: FailureReport) -> int:
    """The bytes ``report`` holds in memory while it waits: the record, its time, its strings
    and its tuple of ids, and its slot in the queue."""
    texts = [report.key, report.query, report.signal, *report.ids]
    texts += [t for t in (report.target, report.note, report.source) if t is not None]
    record = sys.getsizeof(report) + sys.getsizeof(vars(report)) + sys.getsizeof(report.at)
    return record + sys.getsizeof(report.ids) + sum(map(sys.getsizeof, texts)) + 8


class Intake:
    """The queue between the route and the database, and the batches written from it."""

    def __init__(
        self,
        store: CandidateStore,
        settings: IntakeSettings,
        on_received: Callable[[str], None] = lambda _signal: None,
        on_dropped: Callable[[str, int], None] = lambda _reason, _n: None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.redact = Redactor(settings.redactions)
        self.limiter = SourceLimiter(settings.rate, settings.burst)
        self.proxies = TrustedProxies(settings.trusted_proxies)
        self._queue: list[tuple[FailureReport, int]] = []  # each with its footprint
        self._writing = 0  # reports of the batch being written (they still hold memory)
        self._bytes = 0  # footprints of the queue and of the batch being written
        self._on_received = on_received
        self._on_dropped = on_dropped
        self._failing = False
        # Checking and redacting a large report is milliseconds of pure Python: in a thread,
        # the event loop gets the interpreter back every switch interval meanwhile.
        self._checks = ThreadPoolExecutor(1, thread_name_prefix="ragcanary-intake")

    def configure(self, settings: IntakeSettings) -> None:
        """Take the settings of a reloaded config."""
        if settings != self.settings:
            self.settings = settings
            self.redact = Redactor(settings.redactions)
            self.limiter = SourceLimiter(settings.rate, settings.burst)
            self.proxies = TrustedProxies(settings.trusted_proxies)

    def client(self, peer: str | None, forwarded_for: Sequence[str]) -> str:
        """Whose reports a request's are: see ``serve.intake.forwarded``."""
        return self.proxies.client(peer, forwarded_for)

    async def receive(self, body: bytes, targets: Sequence[str], client: str) -> FailureReport:
        """Limit, check and queue the report in ``body``; ``Refused`` says why not (counted)."""
        try:
            wait = self.limiter.take(client)
            if wait is not None:
                reason = (
                    f"too many reports from {client}: at most {self.settings.rate:g} a second "
                    f"in bursts of {self.settings.burst}; retry in {wait:.1f}s"
                )
                raise Refused(429, reason, "rate_limited", wait)
            if len(body) <= INLINE_BYTES:
                report, size = self._check(body, list(targets))
            else:
                report, size = await run_in(self._checks, self._check, body, list(targets))
            if len(self._queue) + self._writing >= MAX_QUEUED or (
                self._bytes + size > MAX_QUEUED_BYTES
            ):
                waiting = f"{self.queued + self._writing} reports, {self._bytes / 2**20:.1f} MiB"
                reason = f"storage is not keeping up: {waiting} wait for it already; retry later"
                raise Refused(503, reason, "queue_full")
        except Refused as refused:
            self._on_dropped(refused.counted_as, 1)
            raise
        self._queue.append((report, size))
        self._bytes += size
        self._on_received(report.signal)
        return report

    def _check(self, body: bytes, targets: list[str]) -> tuple[FailureReport, int]:
        """The report in ``body`` and its footprint."""
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            raise Refused(400, "the body is not JSON; send a JSON object", "invalid") from None
        report = check(parsed, targets, self.redact, datetime.now(UTC))
        return report, footprint(report)

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """The memory the waiting reports hold (those being written included)."""
        return self._bytes

    async def flush(self) -> Added | None:
        """Write what waits, in one batch; None (and the reports kept) while storage fails.

        A report the database refuses is dropped and counted (``unstorable``), the rest of its
        batch stored; reports left when storage failed partway wait for the next batch.
        """
        if not self._queue:
            return None
        batch, self._queue = self._queue, []
        self._writing = len(batch)
        try:
            reports = [report for report, _size in batch]
            added = await run_in(None, self.store.add, reports, self.settings.max_pending)
        except StorageError as exc:
            self._queue = batch + self._queue
            if not self._failing:
                log.warning("failure reports wait for storage", reports=len(batch), error=str(exc))
            self._failing = True
            return None
        finally:
            self._writing = 0
        left = {id(report) for report in added.unstored}
        self._queue = [entry for entry in batch if id(entry[0]) in left] + self._queue
        self._bytes -= sum(size for report, size in batch if id(report) not in left)
        self._failing = bool(left)
        for refusal in added.refusals:
            log.warning("failure report dropped: the database refused it", error=refusal[:300])
        for reason, count in added.dropped.items():
            self._on_dropped(reason, count)
        return added

    def close(self) -> None:
        """Stop the checking thread (at shutdown, after the last flush)."""
        self._checks.shutdown(wait=False, cancel_futures=True)


class Recount:
    """When to count the pending candidates again (a scan of them all, so not after every batch).

    While batches are stored, at most once every ``after_change_s``; a batch stored since the
    last count keeps one due, so the count after a burst's last batch still comes. Without
    batches, every ``every_s`` anyway: a review closes candidates outside the intake.
    """

    def __init__(self, after_change_s: float, every_s: float) -> None:
        self.after_change_s, self.every_s = after_change_s, every_s
        self._changed = True  # nothing counted yet
        self._tried_at: float | None = None

    def stored(self) -> None:
        """A batch changed the candidates."""
        self._changed = True

    def due(self, now: float) -> bool:
        if self._tried_at is None:
            return True
        wait = self.after_change_s if self._changed else self.every_s
        return now - self._tried_at >= wait

    def counted(self, started: float, ok: bool) -> None:
        """A count that started at ``started`` ended; unless ``ok``, one is due again later."""
        self._tried_at = started
        if ok:
            self._changed = False
