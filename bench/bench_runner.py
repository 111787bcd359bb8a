"""Benchmark 1: run_suite + HttpTarget against a real retriever that answers after a fixed delay."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.abc
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from retriever import DelayedRetriever

from ragcanary.runner import run_suite
from ragcanary.suite import Case, Suite
from ragcanary.target import HttpTarget, make_client

DEPTH = 10


@dataclass(frozen=True)
class CycleTiming:
    """One configuration's cycle times against its ideal."""

    concurrency: int
    rate_limit: float | None
    queries: int
    delay_s: float
    ideal_s: float
    median_s: float
    best_s: float
    worst_s: float

    @property
    def overhead_s(self) -> float:
        return self.median_s - self.ideal_s

    @property
    def efficiency(self) -> float:
        """Ideal over measured: 1.0 means the runner adds nothing to the retriever's latency."""
        return self.ideal_s / self.median_s


def ideal_cycle_s(queries: int, delay_s: float, concurrency: int, rate: float | None) -> float:
    """The shortest possible cycle: full waves of ``concurrency``, or the rate limit's spacing."""
    waves = math.ceil(queries / concurrency) * delay_s
    if rate is None:
        return waves
    # The last query may start no earlier than (queries - 1) / rate and still takes delay_s.
    return max(waves, (queries - 1) / rate + delay_s)


def bench_concurrency(
    queries: int,
    delay_s: float,
    concurrencies: list[int],
    rate_limited: list[int],
    rate: float,
    repeat: int,
) -> list[CycleTiming]:
    """Cycle times for every concurrency without a rate limit, then with ``rate`` per second."""
    return asyncio.run(
        _bench(queries, delay_s, concurrencies, rate_limited, rate, repeat),
    )


async def _bench(
    queries: int,
    delay_s: float,
    concurrencies: list[int],
    rate_limited: list[int],
    rate: float,
    repeat: int,
) -> list[CycleTiming]:
    suite = Suite(tuple(Case(f"case-{i}", f"query number {i}") for i in range(queries)))
    plan = [(c, None) for c in concurrencies] + [(c, rate) for c in rate_limited]
    timings = []
    with DelayedRetriever(delay_s) as retriever:
        config = retriever.target_config()
        # One client for every cycle, as the daemon keeps one per target: connections are
        # reused from cycle to cycle and the first connect is paid by the warm-up cycle.
        async with make_client(config) as client:
            target = HttpTarget("bench", config, client)
            await _cycle(suite, target, max(concurrencies), None)
            for concurrency, limit in plan:
                times = [await _cycle(suite, target, concurrency, limit) for _ in range(repeat)]
                timings.append(
                    CycleTiming(
                        concurrency=concurrency,
                        rate_limit=limit,
                        queries=queries,
                        delay_s=delay_s,
                        ideal_s=ideal_cycle_s(queries, delay_s, concurrency, limit),
                        median_s=statistics.median(times),
                        best_s=min(times),
                        worst_s=max(times),
                    )
                )
                print(f"  {_label(timings[-1])}: median {timings[-1].median_s:.3f} s")
        expected = queries * (1 + len(plan) * repeat)
        if retriever.served() != expected:
            raise RuntimeError(f"retriever saw {retriever.served()} requests, not {expected}")
    return timings


async def _cycle(suite: Suite, target: HttpTarget, concurrency: int, rate: float | None) -> float:
    run = await run_suite(
        "bench", suite, target, depth=DEPTH, concurrency=concurrency, rate_limit=rate
    )
    failed = [r.answer.error for r in run.results if r.answer.outcome != "ok"]
    if failed:
        raise RuntimeError(f"{len(failed)} queries failed, first: {failed[0]}")
    return run.duration_s


def _label(timing: CycleTiming) -> str:
    limit = f", rate_limit {timing.rate_limit:g}/s" if timing.rate_limit else ""
    return f"concurrency {timing.concurrency}{limit}"


class _ImportCounter(importlib.abc.MetaPathFinder):
    """Counts attempts to import one module; finds nothing, so the import goes on as usual."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.attempts = 0

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == self.name:
            self.attempts += 1


def imports_per_query(module: str, queries: int, concurrency: int) -> float:
    """Attempts to import ``module`` per query in one cycle (0 once it is imported or absent).

    A module that was imported sits in ``sys.modules`` and is never looked up again; one
    that is missing is searched for along the whole ``sys.path`` on every attempt.
    """
    return asyncio.run(_imports_per_query(module, queries, concurrency))


async def _imports_per_query(module: str, queries: int, concurrency: int) -> float:
    suite = Suite(tuple(Case(f"case-{i}", f"query number {i}") for i in range(queries)))
    counter = _ImportCounter(module)
    with DelayedRetriever(0.0) as retriever:
        config = retriever.target_config()
        async with make_client(config) as client:
            target = HttpTarget("bench", config, client)
            await _cycle(suite, target, concurrency, None)
            sys.meta_path.insert(0, counter)
            try:
                await _cycle(suite, target, concurrency, None)
            finally:
                sys.meta_path.remove(counter)
    return counter.attempts / queries


def failed_import_us(module: str, attempts: int = 200) -> float:
    """Microseconds one ``import module`` takes when the module is not installed."""
    start = time.perf_counter()
    for _ in range(attempts):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    return (time.perf_counter() - start) * 1e6 / attempts
