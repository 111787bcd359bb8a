"""Tests for running a suite: concurrency bound, rate limit, suite order, run metadata."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import Answer
from ragcanary.probe.runner import (
    PACE,
    PACED_GAP_BELOW_S,
    START_SPREAD_S,
    Pacer,
    RateLimiter,
    TargetGate,
    run_suite,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Clock:
    """A clock that only moves when told to; its sleep records delays and returns at once."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.delays: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)


def make_suite(n: int) -> Suite:
    return Suite(tuple(Case(id=f"c{i}", query=f"q{i}") for i in range(n)))


def ok(query: str, latency_s: float = 0.01) -> Answer:
    return Answer((f"doc-{query}",), (1.0,), latency_s, "ok")


class CountingTarget:
    """Answers every query, each said to have taken ``latency_s``; tracks how many searches
    are in flight at once."""

    name = "counting"

    def __init__(self, barrier: asyncio.Barrier | None = None, latency_s: float = 0.01) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.barrier = barrier
        self.latency_s = latency_s

    async def search(self, query: str, k: int) -> Answer:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.barrier is not None:
                await self.barrier.wait()
            return ok(query, self.latency_s)
        finally:
            self.in_flight -= 1


# --- RateLimiter --------------------------------------------------------------------------------


async def test_rate_limiter_spaces_simultaneous_callers_evenly():
    """Callers arriving together start 1/rate apart, in arrival order, the first at once."""
    clock = Clock()
    limiter = RateLimiter(5, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(limiter.acquire() for _ in range(5)))
    assert clock.delays == [pytest.approx(d) for d in (0.2, 0.4, 0.6, 0.8)]


async def test_rate_limiter_does_not_wait_when_callers_are_slow_enough():
    """Requests already spaced wider than 1/rate never wait."""
    clock = Clock()
    limiter = RateLimiter(2, clock=clock, sleep=clock.sleep)
    for t in (0.0, 0.5, 1.7, 3.0):
        clock.now = t
        await limiter.acquire()
    assert clock.delays == []


@settings(max_examples=100, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=100),
    gaps=st.lists(st.floats(min_value=0, max_value=2), min_size=1, max_size=30),
)
def test_rate_limiter_never_starts_two_requests_closer_than_one_over_rate(rate, gaps):
    """Starts are never before arrival, >= 1/rate apart, and no later than needed."""
    clock = Clock()
    limiter = RateLimiter(rate, clock=clock, sleep=clock.sleep)
    starts: list[float] = []

    async def arrive_all() -> None:
        for gap in gaps:
            clock.now += gap
            before = len(clock.delays)
            await limiter.acquire()
            waited = clock.delays[before] if len(clock.delays) > before else 0.0
            starts.append(clock.now + waited)

    asyncio.run(arrive_all())
    arrivals = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    for i, start in enumerate(starts):
        assert start >= arrivals[i] - 1e-9
        if i:
            assert start - starts[i - 1] >= 1 / rate - 1e-9
            assert start == pytest.approx(max(arrivals[i], starts[i - 1] + 1 / rate))


@pytest.mark.parametrize("rate", [0, -1.0])
def test_rate_limiter_rejects_non_positive_rates(rate):
    """A rate of zero or below is a programming error, not an infinite wait."""
    with pytest.raises(ValueError, match="rate must be above 0"):
        RateLimiter(rate)


# --- run_suite ----------------------------------------------------------------------------------


async def test_at_most_concurrency_queries_are_in_flight():
    """With C=3, exactly three searches run together (the barrier proves it) and never more."""
    target = CountingTarget(asyncio.Barrier(3))
    async with asyncio.timeout(5):
        run = await run_suite("s", make_suite(9), target, depth=5, concurrency=3, rate_limit=None)
    assert target.max_in_flight == 3
    assert len(run.results) == 9


async def test_the_workers_first_queries_go_out_spread_over_a_few_milliseconds():
    """C queries sent in one burst come back in one burst, and then every round of queries
    stays in step: each waits for the whole burst to be handled before the next goes out
    (docs/performance.md, "Cycle time"). So the C first queries, held by the barrier until
    all have started, start START_SPREAD_S / C apart; the clock's sleep records the waits."""
    clock = Clock()
    async with asyncio.timeout(5):
        await run_suite(
            "s",
            make_suite(8),
            CountingTarget(asyncio.Barrier(8)),
            depth=5,
            concurrency=8,
            rate_limit=None,
            clock=clock,
            sleep=clock.sleep,
        )
    assert clock.delays == pytest.approx([i * START_SPREAD_S / 8 for i in range(1, 8)])


async def test_once_answered_starts_are_kept_apart_by_a_share_of_the_fastest_answer():
    """After an answer that took L, C queries in flight leave L / C between starts on average;
    starts that come together are kept PACE of that apart. A slower answer keeps the gap."""
    clock = Clock()
    pacer = Pacer(4, clock=clock, sleep=clock.sleep)
    pacer.answered(0.004)
    pacer.answered(0.005)
    clock.now = 1.0  # the first reservations are long past
    await asyncio.gather(*(pacer.acquire() for _ in range(3)))
    gap = PACE * 0.004 / 4
    assert gap < PACED_GAP_BELOW_S
    assert clock.delays == pytest.approx([gap, 2 * gap])


async def test_a_faster_answer_narrows_the_gap_between_starts():
    """A retriever that speeds up is not held to its slower pace."""
    clock = Clock()
    pacer = Pacer(4, clock=clock, sleep=clock.sleep)
    pacer.answered(0.004)
    pacer.answered(0.002)
    clock.now = 1.0
    await asyncio.gather(*(pacer.acquire() for _ in range(2)))
    assert clock.delays == pytest.approx([PACE * 0.002 / 4])


async def test_starts_that_answers_leave_far_apart_are_not_paced():
    """Pacing costs an event-loop wake-up per start; where C queries in flight leave more
    than a millisecond or so between starts, they seldom meet, and none waits."""
    clock = Clock()
    pacer = Pacer(8, clock=clock, sleep=clock.sleep)
    pacer.answered(0.020)  # 2 ms apart at PACE
    assert PACE * 0.020 / 8 >= PACED_GAP_BELOW_S
    clock.now = 1.0
    await asyncio.gather(*(pacer.acquire() for _ in range(3)))
    assert clock.delays == []


async def test_once_pacing_is_off_no_start_waits_for_the_first_round_s_slots():
    """An answer showing that starts need no pacing ends the first round's spread too: a
    worker asking its next query right away goes at once, so queries go out in suite order
    (two sleeping to the same slot could wake in either order)."""
    clock = Clock()
    pacer = Pacer(3, clock=clock, sleep=clock.sleep)
    await pacer.acquire()
    pacer.answered(0.010)  # 2.7 ms apart at PACE: not paced
    await pacer.acquire()
    await pacer.acquire()
    assert clock.delays == []


async def test_a_run_paces_its_starts_by_its_answers():
    """In a run, the answers' latency sets the gap. The clock stands still here, so the waits
    add up: the second start comes the first round's gap (START_SPREAD_S over one worker)
    after the first, and the third, after an answer of 1 ms, a paced gap after that."""
    clock = Clock()
    await run_suite(
        "s",
        make_suite(3),
        CountingTarget(latency_s=0.001),
        depth=1,
        concurrency=1,
        rate_limit=None,
        clock=clock,
        sleep=clock.sleep,
    )
    paced = PACE * 0.001 / 1
    assert clock.delays == pytest.approx([START_SPREAD_S, START_SPREAD_S + paced])


async def test_runs_sharing_a_target_gate_stay_within_its_concurrency_together():
    """Two suites running at once against one target share its C slots, not C each."""
    target = CountingTarget(asyncio.Barrier(3))
    gate = TargetGate(3, None)
    async with asyncio.timeout(5):
        first, second = await asyncio.gather(
            run_suite(
                "a", make_suite(6), target, depth=5, concurrency=3, rate_limit=None, gate=gate
            ),
            run_suite(
                "b", make_suite(6), target, depth=5, concurrency=3, rate_limit=None, gate=gate
            ),
        )
    assert target.max_in_flight == 3
    assert len(first.results) == len(second.results) == 6


async def test_runs_sharing_a_target_gate_share_its_rate_limit():
    """Starts of two concurrent runs against one target are spaced as one stream."""
    clock = Clock()
    gate = TargetGate(4, 10, clock=clock, sleep=clock.sleep)
    await asyncio.gather(
        run_suite(
            "a",
            make_suite(3),
            CountingTarget(),
            depth=5,
            concurrency=4,
            rate_limit=None,
            gate=gate,
            clock=clock,
        ),
        run_suite(
            "b",
            make_suite(3),
            CountingTarget(),
            depth=5,
            concurrency=4,
            rate_limit=None,
            gate=gate,
            clock=clock,
        ),
    )
    assert clock.delays == [pytest.approx(0.1 * i) for i in range(1, 6)]


async def test_results_are_in_suite_order_whatever_order_they_finish_in():
    """The last case finishes first; results still follow the suite, on_result the completion."""
    n = 5
    finished = [asyncio.Event() for _ in range(n)]

    class ReverseTarget:
        name = "reverse"

        async def search(self, query: str, k: int) -> Answer:
            index = int(query[1:])
            if index + 1 < n:
                await finished[index + 1].wait()
            finished[index].set()
            return ok(query)

    completed: list[str] = []
    async with asyncio.timeout(5):
        run = await run_suite(
            "s",
            make_suite(n),
            ReverseTarget(),
            depth=3,
            concurrency=n,
            rate_limit=None,
            on_result=lambda r: completed.append(r.case.id),
        )
    assert [r.case.id for r in run.results] == ["c0", "c1", "c2", "c3", "c4"]
    assert completed == ["c4", "c3", "c2", "c1", "c0"]
    assert [r.answer.ids for r in run.results] == [(f"doc-q{i}",) for i in range(n)]


async def test_run_records_suite_target_times_and_a_fresh_run_id():
    """The run carries names, a uuid4 hex id, a tz-aware UTC start and the measured duration."""
    clock = Clock(100.0)

    class Slow:
        name = "slow"

        async def search(self, query: str, k: int) -> Answer:
            clock.now += 1.25  # each query takes 1.25 s of the fake clock
            return ok(query)

    run = await run_suite(
        "core",
        make_suite(2),
        Slow(),
        depth=3,
        concurrency=1,
        rate_limit=None,
        clock=clock,
        now=lambda: datetime(2024, 5, 1, tzinfo=UTC),
    )
    other = await run_suite(
        "core", make_suite(1), CountingTarget(), depth=3, concurrency=1, rate_limit=None
    )
    assert (run.suite, run.target, other.target) == ("core", "slow", "counting")
    assert re.fullmatch(r"[0-9a-f]{32}", run.run_id)
    assert run.run_id != other.run_id
    assert run.started_at == datetime(2024, 5, 1, tzinfo=UTC)
    assert run.duration_s == 2.5
    assert other.started_at.utcoffset() == timedelta(0)


async def test_given_run_id_is_kept():
    """A caller-chosen run id is used as-is."""
    run = await run_suite(
        "s", make_suite(1), CountingTarget(), depth=1, concurrency=1, rate_limit=None, run_id="abc"
    )
    assert run.run_id == "abc"


async def test_rate_limit_paces_request_starts():
    """With a rate limit, each start after the first waits its slot via the injected sleep,
    and nothing else: the workers' start spread adds no wait of its own."""
    clock = Clock()
    await run_suite(
        "s",
        make_suite(4),
        CountingTarget(),
        depth=1,
        concurrency=4,
        rate_limit=2.0,
        clock=clock,
        sleep=clock.sleep,
    )
    assert clock.delays == [pytest.approx(d) for d in (0.5, 1.0, 1.5)]


async def test_adapter_that_raises_becomes_bad_response_and_the_run_goes_on():
    """A buggy adapter breaking its no-raise promise fails its case only."""

    class Flaky:
        name = "flaky"

        async def search(self, query: str, k: int) -> Answer:
            if query == "q1":
                raise RuntimeError("token=abc leaked?")
            return ok(query)

    run = await run_suite("s", make_suite(3), Flaky(), depth=1, concurrency=2, rate_limit=None)
    outcomes = [r.answer.outcome for r in run.results]
    assert outcomes == ["ok", "bad_response", "ok"]
    assert run.results[1].answer.error == "target adapter failed: RuntimeError"
    assert run.coverage == pytest.approx(2 / 3)


async def test_empty_suite_gives_an_empty_run():
    """No cases, no queries: an empty run with full coverage."""
    run = await run_suite(
        "s", make_suite(0), CountingTarget(), depth=1, concurrency=4, rate_limit=None
    )
    assert (run.results, run.coverage) == ((), 1.0)


async def test_failing_progress_callback_surfaces_as_itself():
    """An exception in on_result propagates unwrapped, not as an ExceptionGroup."""

    def broken(result):
        raise KeyError("progress bar bug")

    with pytest.raises(KeyError, match="progress bar bug"):
        await run_suite(
            "s",
            make_suite(3),
            CountingTarget(),
            depth=1,
            concurrency=2,
            rate_limit=None,
            on_result=broken,
        )


async def test_cancelling_a_run_cancels_queries_in_flight():
    """Cancelling run_suite (e.g. on SIGTERM) cancels every search in flight."""
    started = 0
    all_started = asyncio.Event()
    cancelled: list[str] = []

    class Hanging:
        name = "hanging"

        async def search(self, query: str, k: int) -> Answer:
            nonlocal started
            started += 1
            if started == 3:
                all_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(query)
                raise
            raise AssertionError("unreachable")

    task = asyncio.create_task(
        run_suite("s", make_suite(5), Hanging(), depth=1, concurrency=3, rate_limit=None)
    )
    async with asyncio.timeout(5):
        await all_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["q0", "q1", "q2"]


@pytest.mark.parametrize("concurrency", [0, -2])
async def test_concurrency_below_one_is_rejected(concurrency):
    """A run cannot make progress with no workers; say so instead of returning nothing."""
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        await run_suite(
            "s", make_suite(1), CountingTarget(), depth=1, concurrency=concurrency, rate_limit=None
        )
