"""One retry loop: attempts counted in one place, transient failures retried, waits chosen."""

from __future__ import annotations

import ast
import asyncio
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragcanary.measure.results import Outcome
from ragcanary.probe.retries import (
    MAX_RETRY_DELAY_S,
    QueryFailed,
    Retrying,
    RetrySettings,
    status_outcome,
)

pytestmark = pytest.mark.anyio
SRC = Path(__file__).resolve().parents[2] / "src" / "ragcanary"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Sleeps:
    """An injected sleep that records every delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Attempts:
    """An attempt that fails with the given failures in turn, then returns ``"done"``."""

    def __init__(self, *failures: QueryFailed) -> None:
        self.failures = list(failures)
        self.made = 0

    async def __call__(self) -> str:
        self.made += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def _retrying(retries: int, sleeps: Sleeps, backoff_s: float = 0.2) -> Retrying:
    return Retrying(RetrySettings(retries, backoff_s), sleep=sleeps, jitter=lambda: 0.5)


@pytest.mark.parametrize(
    ("retries", "failures", "made", "delays"),
    [
        pytest.param(0, 0, 1, [], id="no-failure"),
        pytest.param(0, 1, 1, [], id="no-retries-left"),
        pytest.param(1, 1, 2, [0.2], id="one-retry-then-done"),
        pytest.param(2, 2, 3, [0.2, 0.4], id="two-retries-then-done"),
        pytest.param(3, 9, 4, [0.2, 0.4, 0.8], id="spent-no-wait-after-the-last"),
    ],
)
async def test_retries_more_attempts_after_transient_failures_and_no_wait_after_the_last(
    retries: int, failures: int, made: int, delays: list[float]
) -> None:
    """``retries`` is the number of attempts after the first; backoff doubles from 0.2 s."""
    sleeps = Sleeps()
    attempt = Attempts(*(QueryFailed("connect_error", "refused") for _ in range(failures)))
    retrying = _retrying(retries, sleeps)
    if failures > retries:
        with pytest.raises(QueryFailed) as raised:
            await retrying.call(attempt)
        assert raised.value.attempts == made
        assert raised.value.counted == (
            "refused" if made == 1 else f"refused (after {made} attempts)"
        )
    else:
        assert await retrying.call(attempt) == "done"
    assert attempt.made == made
    assert sleeps.delays == [pytest.approx(d) for d in delays]


@pytest.mark.parametrize(
    ("outcome", "retried"),
    [
        ("timeout", True),
        ("connect_error", True),
        ("http_5xx", True),
        ("rate_limited", True),
        ("http_4xx", False),
        ("bad_response", False),
    ],
)
async def test_only_transient_outcomes_are_retried(outcome: Outcome, retried: bool) -> None:
    """A timeout, connect error, 5xx or 429 may pass next time; anything else will not."""
    sleeps = Sleeps()
    attempt = Attempts(QueryFailed(outcome, "no"))
    retrying = _retrying(3, sleeps)
    if retried:
        assert await retrying.call(attempt) == "done"
    else:
        with pytest.raises(QueryFailed):
            await retrying.call(attempt)
    assert (attempt.made, len(sleeps.delays)) == ((2, 1) if retried else (1, 0))


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(7.0, 7.0), (0.0, 0.0), (3600.0, MAX_RETRY_DELAY_S), (None, 0.5)],
)
async def test_a_retry_after_sets_the_wait_capped_else_the_policy_s_backoff(
    retry_after: float | None, expected: float
) -> None:
    """The failure's Retry-After wins over the backoff, never beyond 30 s; the policy names
    its own first backoff (here 0.5 s, the embedder's)."""
    sleeps = Sleeps()
    await _retrying(1, sleeps, backoff_s=0.5).call(
        Attempts(QueryFailed("rate_limited", "HTTP 429", retry_after))
    )
    assert sleeps.delays == [pytest.approx(expected)]


async def test_timed_gives_the_last_attempt_s_duration_on_success_and_failure() -> None:
    """Earlier attempts and the waits between them are not the latency of the answer."""
    ticks = iter([0.0, 1.0, 50.0, 50.25, 60.0, 60.5, 70.0, 70.125])
    retrying = Retrying(RetrySettings(1), sleep=Sleeps(), jitter=lambda: 0.5, clock=ticks.__next__)
    value, latency = await retrying.timed(Attempts(QueryFailed("timeout", "slow")))
    assert (value, latency) == ("done", pytest.approx(0.25))
    with pytest.raises(QueryFailed) as raised:
        await retrying.timed(Attempts(*(QueryFailed("timeout", "slow") for _ in range(2))))
    assert raised.value.latency_s == pytest.approx(0.125)
    assert raised.value.attempts == 2


async def test_one_retrying_serves_concurrent_calls_apart() -> None:
    """No count is shared: two calls at once each get their own attempts."""
    sleeps = Sleeps()
    retrying = _retrying(1, sleeps)
    first, second = Attempts(QueryFailed("timeout", "a")), Attempts()
    assert await asyncio.gather(retrying.call(first), retrying.call(second)) == ["done", "done"]
    assert (first.made, second.made, len(sleeps.delays)) == (2, 1, 1)


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (429, "rate_limited"),
        (500, "http_5xx"),
        (501, "http_5xx"),
        (599, "http_5xx"),
        (400, "http_4xx"),
        (404, "http_4xx"),
        (408, "http_4xx"),
        (304, "bad_response"),
    ],
)
def test_a_status_has_one_outcome_for_targets_and_embedders(code: int, outcome: Outcome) -> None:
    assert status_outcome(code) == outcome


# --- one loop ---------------------------------------------------------------------------------

# A loop that names attempts or retries, or that catches a failure and awaits a sleep before
# it goes round again, counts attempts: only ``Retrying.call`` may. (A synchronous poll until
# a deadline, like the demo retriever's wait for its port, counts none.)
_COUNTING = re.compile(r"attempt|retries|^tries$", re.IGNORECASE)


def _own_nodes(loop: ast.For | ast.AsyncFor | ast.While) -> Iterator[ast.AST]:
    """The nodes of ``loop`` but those of functions defined inside it."""
    stack: list[ast.AST] = [loop]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append(child)


def counting_loops(source: str) -> list[int]:
    """The lines of the loops in ``source`` that count attempts."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.For | ast.AsyncFor | ast.While):
            continue
        names = set()
        catches = sleeps = False
        for inner in _own_nodes(node):
            if isinstance(inner, ast.Name):
                names.add(inner.id)
            elif isinstance(inner, ast.Attribute):
                names.add(inner.attr)
            elif isinstance(inner, ast.Await) and isinstance(inner.value, ast.Call):
                called = inner.value.func
                name = called.attr if isinstance(called, ast.Attribute) else ast.unparse(called)
                sleeps |= "sleep" in name
            elif isinstance(inner, ast.arg):
                names.add(inner.arg)
            catches |= isinstance(inner, ast.ExceptHandler)
        if any(_COUNTING.search(name) for name in names) or (catches and sleeps):
            found.append(node.lineno)
    return found


def test_src_has_one_loop_that_counts_attempts_the_retrying_one() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        for line in counting_loops(path.read_text(encoding="utf-8"))
    ]
    call = next(
        node
        for node in ast.walk(ast.parse((SRC / "probe" / "retries.py").read_text()))
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "call"
    )
    assert len(found) == 1, found
    path, line = found[0].split(":")
    assert path == "probe/retries.py"
    assert call.lineno < int(line) <= (call.end_lineno or 0)


@pytest.mark.parametrize(
    "loop",
    [
        pytest.param(
            """
            attempt = 0
            while True:
                try:
                    return await self._send()
                except QueryFailed as failure:
                    attempt += 1
                    if attempt > self._config.retries:
                        raise
            """,
            id="while-counting",
        ),
        pytest.param(
            """
            for attempt in range(1, attempts + 1):
                try:
                    return await self._request(texts)
                except _Failed:
                    await self._sleep(1.0)
            """,
            id="for-over-attempts",
        ),
        pytest.param(
            """
            for _ in range(self._config.retries + 1):
                rows = await self._call(ask)
            """,
            id="range-of-retries",
        ),
        pytest.param(
            """
            while True:
                try:
                    return await self._call(ask)
                except Exception:
                    await asyncio.sleep(delay)
            """,
            id="catch-and-sleep",
        ),
    ],
)
def test_the_loop_finder_sees_each_way_of_counting_attempts(loop: str) -> None:
    """The check above bites: each of the loops this module replaced is one it finds."""
    source = "async def f(self):\n" + textwrap.indent(textwrap.dedent(loop), "    ")
    assert len(counting_loops(source)) == 1


def test_the_reference_says_retry_after_is_honoured_for_targets_and_embedders() -> None:
    """Every ``retries`` row of docs/config.md (targets, embedders, judges) promises what
    ``Retrying.delay`` does."""
    page = (SRC.parents[1] / "docs" / "config.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `retries` |")]
    assert len(rows) == 3
    assert all("(Retry-After honoured)" in row for row in rows), rows
