"""Failure reports from the application (``POST /api/v1/candidates``): checked, redacted, queued.

The route is called from a production application's request path, so it never waits for the
database: a report is checked against its bounds, personal data is redacted out of it, its
source is rate-limited, and it joins a bounded queue that a background task writes in
batches (``Intake.flush``). What cannot be taken is refused with its reason and counted.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from ragcanary.serve.families import CANDIDATE_SIGNALS
from ragcanary.store.candidates import Added, CandidateStore, FailureReport
from ragcanary.store.errors import StorageError
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.threads import run_in

log = structlog.get_logger("ragcanary")

SIGNALS = CANDIDATE_SIGNALS
MAX_QUERY_CHARS = 2_000
MAX_IDS = 100
MAX_ID_CHARS = 512
MAX_NOTE_CHARS = 1_000
MAX_SOURCE_CHARS = 200
MAX_QUEUED = 10_000  # reports waiting for the database; more are refused (503)
MAX_SOURCES = 10_000  # rate-limit buckets kept; the least recently seen go first
_FIELDS = ("query", "signal", "target", "ids", "note", "source")
_TRAILING = re.compile(r"[\s?!.,;:]+$")

# Redacted before anything is stored: e-mail addresses and phone numbers (7+ digits, with the
# usual separators), unless the config names its own patterns.
DEFAULT_REDACTIONS: tuple[tuple[str, str], ...] = (
    (r"[\w.+-]+@[\w-]+(\.[\w-]+)+", "<email>"),
    (r"(?<![\w])\+?\d[\d ().-]{5,}\d(?![\w])", "<phone>"),
)


class Refused(Exception):
    """A report that cannot be taken: the HTTP status and the reason, for the caller."""

    def __init__(self, status: int, reason: str, counted_as: str, retry_s: float = 0.0) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.counted_as = counted_as  # ragcanary_candidates_dropped_total{reason}
        self.retry_s = retry_s  # for a 429: when the source may report again


def normalised(query: str) -> str:
    """The form two reports of one question share: NFKC, case-folded, spaces collapsed, no
    trailing punctuation."""
    text = unicodedata.normalize("NFKC", query).casefold()
    return _TRAILING.sub("", " ".join(text.split()))


def query_key(query: str) -> str:
    return hashlib.sha256(normalised(query).encode("utf-8")).hexdigest()


class Redactor:
    """Replaces each pattern's matches, in order."""

    def __init__(self, patterns: Sequence[tuple[str, str]] = DEFAULT_REDACTIONS) -> None:
        self._patterns = [(re.compile(p), replacement) for p, replacement in patterns]

    def __call__(self, text: str) -> str:
        for pattern, replacement in self._patterns:
            text = pattern.sub(replacement, text)
        return text


class SourceLimiter:
    """A token bucket per source: ``rate`` reports a second, bursts of ``burst``."""

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


def intake_settings(loaded: LoadedConfig) -> IntakeSettings:
    """The failure reports' bounds and redactions, from the config's ``candidates:``."""
    config = loaded.config.candidates
    redactions = (
        DEFAULT_REDACTIONS
        if config.redact is None
        else tuple((r.pattern, r.replace) for r in config.redact)
    )
    return IntakeSettings(config.max_pending, config.rate_limit, config.burst, redactions)


def check(body: Any, targets: Sequence[str], redact: Redactor, now: datetime) -> FailureReport:
    """The report in ``body`` (parsed JSON), bounded and redacted; ``Refused`` (400) if not."""
    if not isinstance(body, Mapping):
        raise Refused(400, 'send a JSON object like {"query": ..., "signal": ...}', "invalid")
    unknown = sorted(set(body) - set(_FIELDS))
    if unknown:
        raise Refused(400, f"unknown field {unknown[0]!r}; known: {', '.join(_FIELDS)}", "invalid")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise Refused(400, "query: a non-empty string is required", "invalid")
    if len(query) > MAX_QUERY_CHARS:
        reason = f"query: {len(query)} characters, more than {MAX_QUERY_CHARS}"
        raise Refused(400, reason, "too_large")
    signal = body.get("signal")
    if signal not in SIGNALS:
        raise Refused(400, f"signal: one of {', '.join(SIGNALS)}, not {signal!r}", "invalid")
    target = _text(body, "target", MAX_SOURCE_CHARS)
    if target is not None and target not in targets:
        known = ", ".join(targets) or "none configured"
        raise Refused(400, f"target: {target!r} is not configured (known: {known})", "invalid")
    ids = body.get("ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise Refused(400, "ids: a list of strings (what the application retrieved)", "invalid")
    if len(ids) > MAX_IDS or any(len(i) > MAX_ID_CHARS for i in ids):
        reason = f"ids: at most {MAX_IDS}, each at most {MAX_ID_CHARS} characters"
        raise Refused(400, reason, "too_large")
    note = _text(body, "note", MAX_NOTE_CHARS)
    clean = redact(query.strip())
    return FailureReport(
        key=query_key(clean),
        query=clean,
        signal=signal,
        at=now,
        target=target,
        ids=tuple(ids),
        note=redact(note) if note is not None else None,
        source=_text(body, "source", MAX_SOURCE_CHARS),
    )


def _text(body: Mapping[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Refused(400, f"{name}: a string", "invalid")
    if len(value) > limit:
        raise Refused(400, f"{name}: more than {limit} characters", "too_large")
    return value


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
        self._queue: list[FailureReport] = []
        self._on_received = on_received
        self._on_dropped = on_dropped
        self._failing = False

    def configure(self, settings: IntakeSettings) -> None:
        """Take the settings of a reloaded config."""
        if settings != self.settings:
            self.settings = settings
            self.redact = Redactor(settings.redactions)
            self.limiter = SourceLimiter(settings.rate, settings.burst)

    def receive(self, body: Any, targets: Sequence[str], client: str) -> FailureReport:
        """Check and queue one report; ``Refused`` says why not (and it is counted)."""
        try:
            report = check(body, targets, self.redact, datetime.now(UTC))
            wait = self.limiter.take(report.source or client)
            if wait is not None:
                reason = f"too many reports from this source; retry in {wait:.1f}s"
                raise Refused(429, reason, "rate_limited", wait)
            if len(self._queue) >= MAX_QUEUED:
                raise Refused(
                    503, "too many reports waiting for storage; retry later", "queue_full"
                )
        except Refused as refused:
            self._on_dropped(refused.counted_as, 1)
            raise
        self._queue.append(report)
        self._on_received(report.signal)
        return report

    def count_refused(self, reason: str) -> None:
        """Count a report refused before it could be read (a body that is not JSON)."""
        self._on_dropped(reason, 1)

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def flush(self) -> Added | None:
        """Write what waits, in one batch; None (and the reports kept) while storage fails."""
        if not self._queue:
            return None
        batch, self._queue = self._queue, []
        try:
            added = await run_in(None, self.store.add, batch, self.settings.max_pending)
        except StorageError as exc:
            waiting = batch + self._queue
            self._queue = waiting[-MAX_QUEUED:]  # past the bound, the oldest go
            if len(waiting) > MAX_QUEUED:
                self._on_dropped("queue_full", len(waiting) - MAX_QUEUED)
            if not self._failing:
                log.warning("failure reports wait for storage", reports=len(batch), error=str(exc))
            self._failing = True
            return None
        self._failing = False
        for reason, count in added.dropped.items():
            self._on_dropped(reason, count)
        return added


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
