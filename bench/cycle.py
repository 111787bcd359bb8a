"""Benchmark: one canary cycle against the ideal ceil(N / C) * L and against a bare httpx loop.

Our cycle is what the daemon runs: ``run_suite`` over an ``HttpTarget`` with the production
``make_client`` client (kept open across cycles, as the daemon keeps one per target) and the
target's ``TargetGate``. The bare loop is the least a Python client can do for the same
requests: an ``asyncio.Semaphore(C)``, ``httpx.AsyncClient.post`` and ``json.loads``. Both
ask the same retriever (``bench/retriever.py``, its own process, answering after exactly L)
in the same process, alternately, so load on the machine hits both alike.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from render import section, table, verdict
from retriever import DEPTH, RetrieverProcess

from ragcanary.config.model import TargetConfig
from ragcanary.measure.results import RunResult
from ragcanary.probe.runner import TargetGate, run_suite
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.suites.suite import Case, Suite

TITLE = "Cycle time"
GOAL_IDEAL = 1.10  # our cycle over ceil(N / C) * L
GOAL_BARE = 1.05  # our cycle over the bare httpx loop's


@dataclass(frozen=True)
class Shape:
    """One cycle to time: N canaries at concurrency C against a retriever answering after L."""

    label: str
    queries: int
    concurrency: int
    latency_s: float

    @property
    def ideal_s(self) -> float:
        return math.ceil(self.queries / self.concurrency) * self.latency_s


SHAPES = (
    Shape("the issue's goal", 1000, 32, 0.020),
    Shape("the checker's case", 400, 20, 0.050),
)
FULL_REPEAT = 7
QUICK_REPEAT = 3


@dataclass
class Timings:
    """Wall and process CPU seconds of each timed cycle of one kind."""

    wall_s: list[float]
    cpu_s: list[float]


Cycle = Callable[[], Awaitable[Any]]


async def timed(cycle: Cycle, into: Timings) -> None:
    """Run ``cycle`` once and append its wall and CPU time to ``into``."""
    cpu, wall = time.process_time(), time.perf_counter()
    await cycle()
    into.wall_s.append(time.perf_counter() - wall)
    into.cpu_s.append(time.process_time() - cpu)


def canaries(count: int) -> Suite:
    """``count`` labelled canaries; each expects one of the retriever's ids, or one it lacks."""
    return Suite(
        tuple(
            Case(f"case-{i}", f"canary query number {i}", {f"doc-{i % (DEPTH + 2)}": 1})
            for i in range(count)
        )
    )


def our_cycle(config: TargetConfig, client: httpx.AsyncClient, suite: Suite, c: int) -> Cycle:
    """The daemon's cycle: a fresh ``HttpTarget`` per run, as ``probe.cycle`` builds it."""
    gate = TargetGate(c, None)

    async def cycle() -> RunResult:
        target = HttpTarget("bench", config, client)
        run = await run_suite(
            "bench", suite, target, depth=DEPTH, concurrency=c, rate_limit=None, gate=gate
        )
        failed = [r.answer.error for r in run.results if r.answer.outcome != "ok"]
        if failed:
            raise RuntimeError(f"{len(failed)} of our queries failed, first: {failed[0]}")
        return run

    return cycle


def bare_cycle(url: str, client: httpx.AsyncClient, suite: Suite, c: int) -> Cycle:
    """The reference: the same requests with nothing but a semaphore, httpx and json.loads."""
    texts = [case.query for case in suite.cases]

    async def cycle() -> None:
        slots = asyncio.Semaphore(c)

        async def one(text: str) -> Any:
            async with slots:
                response = await client.post(url, json={"q": text, "k": DEPTH})
                return json.loads(response.content)

        answers = await asyncio.gather(*(one(text) for text in texts))
        if any(len(a["hits"]) != DEPTH for a in answers):
            raise RuntimeError("the bare loop got an incomplete answer")

    return cycle


async def compare(shape: Shape, repeat: int) -> dict[str, Any]:
    """Interleaved timings of our cycle and the bare loop for ``shape``, plus the retriever's."""
    ours, bare = Timings([], []), Timings([], [])
    with RetrieverProcess(shape.latency_s) as retriever:
        config = retriever.target_config(concurrency=shape.concurrency)
        async with make_client(config) as our_client, httpx.AsyncClient() as bare_client:
            suite = canaries(shape.queries)
            mine = our_cycle(config, our_client, suite, shape.concurrency)
            theirs = bare_cycle(retriever.url, bare_client, suite, shape.concurrency)
            await mine()  # warm-up: connections, imports, caches
            await theirs()
            before = retriever.stats()
            for i in range(repeat):
                # Alternate who goes first so a slow spell on the machine hits both alike.
                pair = (
                    ((mine, ours), (theirs, bare)) if i % 2 == 0 else ((theirs, bare), (mine, ours))
                )
                for cycle, into in pair:
                    await timed(cycle, into)
            after = retriever.stats()
    served = after["served"] - before["served"]
    expected = 2 * repeat * shape.queries
    if served != expected:
        raise RuntimeError(f"the retriever answered {served} searches, not {expected}")
    return {
        "label": shape.label,
        "queries": shape.queries,
        "concurrency": shape.concurrency,
        "latency_s": shape.latency_s,
        "ideal_s": shape.ideal_s,
        "repeat": repeat,
        "ours": vars(ours),
        "bare": vars(bare),
        "retriever": {
            "cpu_per_search_us": (after["cpu_s"] - before["cpu_s"]) * 1e6 / served,
            "cpu_share": (after["cpu_s"] - before["cpu_s"]) / (sum(ours.wall_s) + sum(bare.wall_s)),
            "mean_latency_s": after["mean_latency_s"],
        },
    }


def run(quick: bool) -> dict[str, Any]:
    repeat = QUICK_REPEAT if quick else FULL_REPEAT
    shapes = []
    for shape in SHAPES:
        result = asyncio.run(compare(shape, repeat))
        shapes.append(result)
        figures = summary(result)
        print(
            f"  N={shape.queries} C={shape.concurrency} L={shape.latency_s * 1000:g} ms: "
            f"ours {figures['ours_s']:.3f} s, bare {figures['bare_s']:.3f} s, "
            f"ideal {shape.ideal_s:.3f} s"
        )
    return {"shapes": shapes}


def summary(result: dict[str, Any]) -> dict[str, float]:
    """Medians and the two goal ratios; ours/bare is the median of the interleaved pairs."""
    ours, bare = result["ours"]["wall_s"], result["bare"]["wall_s"]
    return {
        "ours_s": statistics.median(ours),
        "bare_s": statistics.median(bare),
        "vs_ideal": statistics.median(ours) / result["ideal_s"],
        "bare_vs_ideal": statistics.median(bare) / result["ideal_s"],
        "vs_bare": statistics.median(o / b for o, b in zip(ours, bare, strict=True)),
        "ours_cpu_ms": statistics.median(result["ours"]["cpu_s"]) * 1000 / result["queries"],
        "bare_cpu_ms": statistics.median(result["bare"]["cpu_s"]) * 1000 / result["queries"],
    }


def render(result: dict[str, Any]) -> str:
    rows, notes = [], []
    for shape in result["shapes"]:
        s = summary(shape)
        retriever = shape["retriever"]
        rows.append(
            [
                f"{shape['queries']:,} canaries, C = {shape['concurrency']}, "
                f"L = {shape['latency_s'] * 1000:g} ms ({shape['label']})",
                f"{shape['ideal_s']:.3f}",
                f"{s['bare_s']:.3f}",
                f"{s['ours_s']:.3f}",
                f"**{s['vs_ideal']:.3f}** ({verdict(s['vs_ideal'], GOAL_IDEAL)})",
                f"**{s['vs_bare']:.3f}** ({verdict(s['vs_bare'], GOAL_BARE)})",
                f"{s['bare_vs_ideal']:.3f}",
            ]
        )
        notes.append(
            f"{shape['queries']:,} canaries: the retriever used"
            f" {retriever['cpu_per_search_us']:.0f} µs of CPU per search"
            f" ({retriever['cpu_share']:.0%} of one core) and answered"
            f" after {retriever['mean_latency_s'] * 1000:.2f} ms on average for"
            f" L = {shape['latency_s'] * 1000:g} ms; our process used"
            f" {s['ours_cpu_ms']:.2f} ms of CPU per query, the bare loop {s['bare_cpu_ms']:.2f} ms."
        )
    figures = table(
        [
            "cycle",
            "ideal s",
            "bare httpx s",
            "ours s",
            f"ours / ideal (goal ≤ {GOAL_IDEAL:.2f})",
            f"ours / bare (goal ≤ {GOAL_BARE:.2f})",
            "bare / ideal",
        ],
        rows,
    )
    figures += "\n\n" + "\n".join(f"- {note}" for note in notes)
    first = result["shapes"][0]
    what = (
        "Wall time of one canary cycle of N queries at concurrency C against a retriever that"
        " answers every search after exactly L: the daemon's `run_suite` with an `HttpTarget`"
        " and the production `make_client` client (kept open across cycles, as the daemon keeps"
        " it), against the ideal ⌈N / C⌉ · L and against a bare httpx loop (an"
        " `asyncio.Semaphore(C)`, `httpx.AsyncClient.post` and `json.loads`) sending the same"
        " requests to the same retriever in the same process. The retriever"
        " (`bench/retriever.py`) is a raw asyncio server in its own process that sends one"
        f" pre-built answer of {DEPTH} hits. After one warm-up cycle each, {first['repeat']}"
        " cycles of ours and of the bare loop alternate; the table shows medians, and"
        " ours / bare is the median of the ratios of each alternating pair."
    )
    return section(what, "cycle", figures, meaning(result))


def meaning(result: dict[str, Any]) -> str:
    parts = []
    for shape in result["shapes"]:
        s = summary(shape)
        goals = {
            "the ideal": s["vs_ideal"] <= GOAL_IDEAL,
            "the bare httpx loop": s["vs_bare"] <= GOAL_BARE,
        }
        met = [name for name, ok in goals.items() if ok]
        missed = [name for name, ok in goals.items() if not ok]
        outcome = (
            "both goals are met"
            if not missed
            else f"the goal against {' and '.join(missed)} is **missed**"
            + (f" and the one against {met[0]} met" if met else "")
        )
        # The client's event loop is one thread: to keep up with the ideal it may spend at
        # most the ideal cycle's time, spread over all the queries, on CPU.
        budget_ms = shape["ideal_s"] * 1000 / shape["queries"]
        parts.append(
            f"For {shape['label']} ({shape['queries']:,} canaries, C = {shape['concurrency']},"
            f" L = {shape['latency_s'] * 1000:g} ms) a cycle takes {s['ours_s']:.3f} s:"
            f" {s['vs_ideal']:.3f}x the ideal and {s['vs_bare']:.3f}x the bare httpx loop, so"
            f" {outcome}. To finish within the ideal, the client's single event loop may spend"
            f" at most {budget_ms:.2f} ms of CPU per query; the bare httpx loop alone spent"
            f" {s['bare_cpu_ms']:.2f} ms and ours {s['ours_cpu_ms']:.2f} ms."
        )
    parts.append(
        "Where the bare loop is as far from the ideal as ours, the cost is the HTTP client on"
        " these CPUs, not our code (whose own share per query is in the CPU section). A profile"
        " of the cycle shows most of httpx's time in httpcore's connection pool, which checks"
        " every pooled connection (a `poll()` on each idle socket) whenever a request starts"
        " or a response closes, so its cost per request grows with the concurrency"
        " (encode/httpcore#1035). Two cures were tried and dropped (2026-11-23): at 1,000"
        " canaries and C = 32, keeping 32 connections alive instead of httpx's default 20 made"
        " a cycle 2.2 to 2.6 times slower; at 400 canaries and C = 20, one client of one"
        " connection per slot cut the CPU per query by a third but made the cycle 10% slower,"
        " as all slots then answer and send in lockstep. Our own share went from 107 to 3 us"
        " per query once plain dotted response paths stopped going through jmespath's"
        " interpreter."
    )
    return " ".join(parts)
