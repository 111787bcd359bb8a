"""Running a suite against a target: bounded concurrency, a rate limit, results in suite order."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import Answer, CaseResult, RunResult
from ragcanary.probe.embedding import Embedded
from ragcanary.probe.target import Target
from ragcanary.probe.timer import PreciseTimer

ProgressCallback = Callable[[CaseResult], None]
Sleep = Callable[[float], Awaitable[None]]
Embed = Callable[[Sequence[str]], Awaitable[list[Embedded]]]

# A run's request starts are kept apart (``Pacer``). Queries sent together come back together
# from a retriever that answers in constant time; the client handles those answers in turn,
# and each is late by the handling of those before it. The late ones send their next query
# right after one another, so such trains of queries grow as the run goes on: 1,000 canaries
# at C = 32 against a retriever answering in 20 ms took 21.4 ms per query in the first rounds
# and 25 ms in the middle ones. Kept apart, answers come back one by one, the rounds never
# line up, and a query's measured latency is the retriever's rather than our queue's
# (docs/performance.md, "Cycle time").
# The first C starts are this long apart in all (nothing has been answered yet; 15 and 20 ms
# measured alike) ...
START_SPREAD_S = 0.010
# ... and then this share of the fastest answer's latency over C: below the time C queries in
# flight leave between two starts, so pacing never lowers a run's rate, only breaks its trains.
# Tuned with the waits on a timerfd (``probe.timer``): 0.7 to 0.9 took 1.06-1.08x the ideal
# at C = 32 and L = 20 ms, where 0.6 with asyncio's whole-millisecond waits took 1.09-1.10x.
PACE = 0.8
# Only where that gap is shorter than this. Each paced start is a wake-up of the event loop, and
# starts left further apart seldom meet while the client handles an answer (about half a
# millisecond of CPU): against a retriever answering in 20 ms, pacing took 25-35% more CPU
# per query at C = 8 to end a run 2.5% sooner, and 11% more at C = 32 to end it 6.5% sooner.
PACED_GAP_BELOW_S = 0.001


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart, across all concurrent callers.

    No burst is allowed: a target configured for 20/s never sees 20 requests in the
    same millisecond. Each caller reserves its start slot before it waits, so concurrent
    callers queue in arrival order without a lock.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be above 0, got {rate!r}")
        self._interval = 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self._next_slot: float | None = None

    async def acquire(self) -> None:
        """Return once the caller may start its request."""
        now = self._clock()
        slot = now if self._next_slot is None else max(now, self._next_slot)
        self._next_slot = slot + self._interval
        if slot > now:
            await self._sleep(slot - now)


class Pacer(RateLimiter):
    """Spaces one run's request starts by a share of the time each query in flight leaves.

    With C workers and the fastest answer taking L, C queries in flight start on average at
    least L/C apart; starts are kept ``PACE`` of that apart when that is under
    ``PACED_GAP_BELOW_S``, and the first C, before any answer, ``START_SPREAD_S`` / C apart. A
    faster answer narrows the gap, never a slower one, so a retriever that speeds up is not
    held back.
    """

    def __init__(
        self,
        workers: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__(workers / START_SPREAD_S, clock=clock, sleep=sleep)
        self._workers = workers
        self._fastest = math.inf

    def answered(self, latency_s: float) -> None:
        """Take the latency of an answer into the gap between starts."""
        if latency_s < self._fastest:
            self._fastest = latency_s
            gap = PACE * latency_s / self._workers
            if gap < PACED_GAP_BELOW_S:
                self._interval = gap
            else:  # not paced, and the first round's spread ends too
                self._interval = 0.0
                self._next_slot = None


class TargetGate:
    """What every run against one target shares: its concurrency slots and its rate limit.

    The daemon keeps one per target so that two suites running at once against the same
    target still stay within its ``concurrency`` and ``rate_limit`` together.
    """

    def __init__(
        self,
        concurrency: int,
        rate_limit: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency!r}")
        self.concurrency = concurrency
        self.slots = asyncio.Semaphore(concurrency)
        self.limiter = RateLimiter(rate_limit, clock=clock, sleep=sleep) if rate_limit else None


async def run_suite(
    suite_name: str,
    suite: Suite,
    target: Target,
    *,
    depth: int,
    concurrency: int,
    rate_limit: float | None,
    on_result: ProgressCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = _utc_now,
    sleep: Sleep | None = None,
    run_id: str | None = None,
    gate: TargetGate | None = None,
    embed: Embed | None = None,
) -> RunResult:
    """Ask ``target`` every case of ``suite`` for its top ``depth`` and collect the answers.

    At most ``concurrency`` queries are in flight and at most ``rate_limit`` start per
    second. ``on_result`` is called as each case finishes; the returned results are in
    suite order whatever order they finished in. Cancelling the call cancels every
    query in flight. Runs given the same ``gate`` share its limits (``concurrency`` and
    ``rate_limit`` are then the gate's).

    With ``embed``, every distinct query is embedded first (in its batches) and the target
    gets each case's vector; a case whose query could not be embedded is never sent and
    ends as ``embedding_error``.

    The run's own pacing waits on a ``PreciseTimer`` unless ``sleep`` is given; a gate made
    here waits with ``sleep`` or ``asyncio.sleep``.
    """
    gate = gate or TargetGate(concurrency, rate_limit, clock=clock, sleep=sleep or asyncio.sleep)
    started_at = now()
    started = clock()
    cases = suite.cases
    results: list[CaseResult | None] = [None] * len(cases)
    pending = iter(range(len(cases)))
    vectors: dict[str, Embedded] = {}
    if embed is not None:
        queries = list(dict.fromkeys(case.query for case in cases))
        vectors = dict(zip(queries, await embed(queries), strict=True))

    workers = min(gate.concurrency, len(cases))
    timer = PreciseTimer()
    pacer = Pacer(max(workers, 1), clock=clock, sleep=sleep or timer.sleep)
    starts = gate.limiter or pacer  # a rate limit spaces the starts itself, and wider

    async def worker() -> None:
        # Workers share one iterator: no await between taking an index and owning it.
        for index in pending:
            embedded = vectors.get(cases[index].query)
            if embedded is not None and embedded.vector is None:
                reason = embedded.error or "the query could not be embedded"
                answer = Answer((), (), embedded.latency_s, "embedding_error", reason)
            else:
                async with gate.slots:
                    await starts.acquire()
                    query_vector = embedded.vector if embedded is not None else None
                    answer = await _ask(target, cases[index], depth, clock, query_vector)
                    pacer.answered(answer.latency_s)
            vector = embedded.vector if embedded is not None else None
            result = CaseResult(cases[index], answer, vector)
            results[index] = result
            if on_result is not None:
                on_result(result)

    try:
        with timer:
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
    except BaseExceptionGroup as failed:
        # Only a failing on_result gets here (searches cannot raise). Every worker calls the
        # same callback, so the first failure speaks for all; raise it unwrapped.
        raise failed.exceptions[0] from None
    finished = tuple(r for r in results if r is not None)
    return RunResult(
        suite=suite_name,
        target=target.name,
        run_id=run_id or uuid.uuid4().hex,
        started_at=started_at,
        duration_s=clock() - started,
        results=finished,
    )


async def _ask(
    target: Target,
    case: Case,
    depth: int,
    clock: Callable[[], float],
    vector: Sequence[float] | None = None,
) -> Answer:
    """The target's answer; an adapter that breaks its no-raise promise still yields an outcome."""
    started = clock()
    try:
        if vector is None:
            return await target.search(case.query, depth)
        return await target.search(case.query, depth, vector)
    except Exception as exc:
        reason = f"target adapter failed: {type(exc).__name__}"
        return Answer((), (), clock() - started, "bad_response", reason)
