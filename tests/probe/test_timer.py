"""Tests for the precise timer that paces a run's starts: a timerfd in the loop's epoll set."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import textwrap
import time

import pytest

from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import Answer
from ragcanary.probe.runner import run_suite
from ragcanary.probe.timer import PreciseTimer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's"),
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def timerfds() -> int:
    """How many timerfds this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # listdir's own, closed since
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[timerfd]"
    return count


async def test_a_sleep_ends_on_its_timerfd_before_asyncio_wakes_to_the_millisecond():
    """asyncio waits for a timer in whole milliseconds, rounded up: on an idle loop its
    1.5 ms sleep would end at 2 ms, so the timer's 1.9 ms one ends first (its wake-up ends
    both). Without the timerfd the shorter sleep always ends first. (A loop held up half a
    millisecond between setting both and waiting waits 1 ms and ends asyncio's first; three
    tries of five must go so.)"""
    with PreciseTimer() as timer:
        assert timer.precise
        firsts: list[str] = []

        async def sleep(name: str, wait: asyncio.Future[None], ended: list[str]) -> None:
            await wait
            ended.append(name)

        for _ in range(5):
            ended: list[str] = []
            await asyncio.gather(
                sleep("asyncio", asyncio.ensure_future(asyncio.sleep(0.0015)), ended),
                sleep("timer", asyncio.ensure_future(timer.sleep(0.0019)), ended),
            )
            firsts.append(ended[0])
    assert firsts.count("timer") >= 3, firsts


async def test_sleeps_end_in_the_order_they_are_due_and_never_early():
    """In the order of their due times, not of their delays: the sleeps start one after the
    other, and on a busy machine a later start can make a shorter sleep due after a longer one
    (0.2 ms started 0.4 ms after 0.5 ms), which the timer must then end after it."""
    with PreciseTimer() as timer:
        ended: list[float] = []  # each sleep's due time, in the order the sleeps ended

        async def sleep(delay: float) -> None:
            started = time.monotonic()
            await timer.sleep(delay)
            assert time.monotonic() - started >= delay
            ended.append(started + delay)

        delays = [0.004, 0.0005, 0.002, 0.001, 0.003, 0.0002]
        async with asyncio.timeout(5):
            await asyncio.gather(*(sleep(delay) for delay in delays))
    assert len(ended) == len(delays)
    assert ended == sorted(ended)


async def test_a_cancelled_sleep_leaves_the_others_to_end_at_their_time():
    """The timer is set for the first sleep; cancelled, it still fires then, and is set
    again for the second, which would otherwise never end."""
    with PreciseTimer() as timer:
        started = time.monotonic()
        first = asyncio.ensure_future(timer.sleep(0.001))
        second = asyncio.ensure_future(timer.sleep(0.002))
        await asyncio.sleep(0)
        first.cancel()
        async with asyncio.timeout(5):
            await second
        assert time.monotonic() - started >= 0.002
    assert first.cancelled()


async def test_leaving_closes_its_descriptor_and_ends_the_sleeps_still_waiting():
    before = timerfds()
    with PreciseTimer() as timer:
        assert timerfds() == before + 1
        waiting = asyncio.ensure_future(timer.sleep(60))
        await asyncio.sleep(0)
    assert timerfds() == before
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_timer_not_entered_sleeps_as_asyncio_does():
    timer = PreciseTimer()
    assert not timer.precise
    started = time.monotonic()
    await timer.sleep(0.001)
    assert time.monotonic() - started >= 0.001


class TimerfdCountingTarget:
    """Answers at once, noting how many timerfds the process holds at each search."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def search(self, query: str, k: int) -> Answer:
        self.seen.append(timerfds())
        return Answer((f"doc-{query}",), (1.0,), 0.0001, "ok")


async def test_a_run_paces_its_starts_on_a_timerfd_of_its_own_and_closes_it():
    before = timerfds()
    target = TimerfdCountingTarget()
    suite = Suite(tuple(Case(id=f"c{i}", query=f"q{i}") for i in range(40)))
    async with asyncio.timeout(5):
        run = await run_suite("s", suite, target, depth=1, concurrency=8, rate_limit=None)
    assert len(run.results) == 40
    assert set(target.seen) == {before + 1}
    assert timerfds() == before


def test_out_of_files_a_run_still_runs_on_asyncio_s_timers():
    """A timerfd is one more file; where none can be opened, the run waits as asyncio does
    rather than failing. Run in a fresh interpreter, whose files this test uses up."""
    script = textwrap.dedent(
        """
        import asyncio, errno, os, resource
        from ragcanary.measure.results import Answer
        from ragcanary.probe.runner import run_suite
        from ragcanary.probe.timer import PreciseTimer
        from ragcanary.measure.cases import Case, Suite

        class Target:
            name = "t"
            async def search(self, query, k):
                return Answer(("doc",), (1.0,), 0.0001, "ok")

        async def main():
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
            held = []
            try:
                while True:
                    held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                assert exc.errno == errno.EMFILE, exc
            with PreciseTimer() as timer:
                assert not timer.precise
                await timer.sleep(0.001)
            suite = Suite(tuple(Case(id=f"c{i}", query=f"q{i}") for i in range(20)))
            run = await run_suite("s", suite, Target(), depth=1, concurrency=4, rate_limit=None)
            print(len(run.results), "answered")

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "20 answered"
