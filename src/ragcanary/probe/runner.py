"""Running a suite against a target: bounded concurrency, a rate limit, results in suite order."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from ragcanary.measure.results import Answer, CaseResult, RunResult
from ragcanary.probe.embedding import Embedded
from ragcanary.probe.target import Target
from ragcanary.suites.suite import Case, Suite

ProgressCallback = Callable[[CaseResult], None]
Sleep = Callable[[float], Awaitable[None]]
Embed = Callable[[Sequence[str]], Awaitable[list[Embedded]]]

# The workers' first queries go out spread over this long instead of in one burst. A burst is
# answered as a burst (an in-process retriever, or any that answers in constant time), the
# client handles those answers in turn and sends the next queries together again, so the
# rounds stay in step and each waits for the whole burst to be handled: 1,000 canaries at
# C = 32 took 1.49x the ideal against such a retriever, 1.27x when spread (docs/performance.md,
# "Cycle time"). Spread, the answers come one by one and the rounds never line up. It costs
# a run at most this long, and nothing where a rate limit already spaces the starts.
START_SPREAD_S = 0.010


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
    sleep: Sleep = asyncio.sleep,
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
    """
    gate = gate or TargetGate(concurrency, rate_limit, clock=clock, sleep=sleep)
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

    async def worker(number: int) -> None:
        if number and gate.limiter is None:
            await sleep(number * START_SPREAD_S / workers)
        # Workers share one iterator: no await between taking an index and owning it.
        for index in pending:
            embedded = vectors.get(cases[index].query)
            if embedded is not None and embedded.vector is None:
                reason = embedded.error or "the query could not be embedded"
                answer = Answer((), (), embedded.latency_s, "embedding_error", reason)
            else:
                async with gate.slots:
                    if gate.limiter is not None:
                        await gate.limiter.acquire()
                    query_vector = embedded.vector if embedded is not None else None
                    answer = await _ask(target, cases[index], depth, clock, query_vector)
            vector = embedded.vector if embedded is not None else None
            result = CaseResult(cases[index], answer, vector)
            results[index] = result
            if on_result is not None:
                on_result(result)

    try:
        async with asyncio.TaskGroup() as group:
            for number in range(workers):
                group.create_task(worker(number))
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
