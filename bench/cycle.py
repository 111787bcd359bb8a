"""Benchmark: one canary cycle against the ideal ceil(N / C) * L and against bare client loops.

Our cycle is what the daemon runs: ``run_suite`` over an ``HttpTarget`` with the production
``make_client`` client (kept open across cycles, as the daemon keeps one per target) and the
target's ``TargetGate``. The bare loops are the least a Python client can do for the same
requests, an ``asyncio.Semaphore(C)`` and ``json.loads`` around one of three clients: httpx
with its own transport, httpx over ``httpx_aiohttp.AiohttpTransport``, and aiohttp alone.
All four ask the same retriever (``bench/retriever.py``, its own process, answering after
exactly L) in the same process, in an order that rotates every round, so load on the
machine hits them alike. Each shape runs against each kind of retriever: the raw asyncio
one, a Starlette app on uvicorn, and an aiohttp server.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx_aiohttp
from render import section, table, verdict
from retriever import DEPTH, KINDS, RetrieverProcess

from ragcanary.config.target import TargetConfig
from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import RunResult
from ragcanary.probe.runner import TargetGate, run_suite
from ragcanary.probe.target import HttpTarget, make_client

TITLE = "Cycle time"
GOAL_IDEAL = 1.10  # our cycle over ceil(N / C) * L
GOAL_BARE = 1.05  # our cycle over the fastest bare loop's
SERVERS = {
    "raw": "raw asyncio",
    "uvicorn": "uvicorn (Starlette)",
    "aiohttp": "aiohttp",
}
BARE = {
    "httpx": "bare httpx",
    "httpx_aiohttp": "bare httpx + aiohttp transport",
    "aiohttp": "bare aiohttp",
}
assert set(SERVERS) == set(KINDS)


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
# `ragcanary run` itself, as the checker times it: this shape, against this retriever.
CLI_SHAPE, CLI_SERVER = 0, "uvicorn"
RAGCANARY = Path(sys.executable).with_name("ragcanary")


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
    """A reference: the same requests with nothing but a semaphore, httpx and json.loads."""
    texts = [case.query for case in suite.cases]

    async def cycle() -> None:
        slots = asyncio.Semaphore(c)

        async def one(text: str) -> Any:
            async with slots:
                response = await client.post(url, json={"q": text, "k": DEPTH})
                return json.loads(response.content)

        _check(await asyncio.gather(*(one(text) for text in texts)))

    return cycle


def bare_aiohttp_cycle(url: str, session: aiohttp.ClientSession, suite: Suite, c: int) -> Cycle:
    """The same loop on aiohttp's own API, the fastest Python client we know."""
    texts = [case.query for case in suite.cases]

    async def cycle() -> None:
        slots = asyncio.Semaphore(c)

        async def one(text: str) -> Any:
            async with slots, session.post(url, json={"q": text, "k": DEPTH}) as response:
                return json.loads(await response.read())

        _check(await asyncio.gather(*(one(text) for text in texts)))

    return cycle


def ragcanary_run(shape: Shape, url: str) -> tuple[float, float]:
    """`ragcanary run` on the shape's canaries: its cycle's duration_s and the command's wall."""
    with tempfile.TemporaryDirectory(prefix="ragcanary-cycle-") as tmp:
        workdir = Path(tmp)
        suite = canaries(shape.queries)
        cases = [{"id": c.id, "query": c.query, "relevant": list(c.relevant)} for c in suite.cases]
        (workdir / "suite.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
        config = {
            "storage": f"sqlite:///{workdir}/unused.db",
            "targets": {
                "bench": {
                    "url": url,
                    "body": {"q": "{query}", "k": "{k}"},
                    "timeout": "10s",
                    "retries": 0,
                    "concurrency": shape.concurrency,
                }
            },
            "suites": {"bench": {"cases": "suite.json", "targets": ["bench"], "depth": DEPTH}},
        }
        (workdir / "ragcanary.yaml").write_text(json.dumps(config), encoding="utf-8")
        started = time.perf_counter()
        done = subprocess.run(
            [str(RAGCANARY), "run", "-c", "ragcanary.yaml", "--report", "report.json"],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=120,
        )
        command_s = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise RuntimeError(f"ragcanary run exited {done.returncode}: {done.stderr[-2000:]}")
        report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
    if report["coverage"] != 1.0:
        raise RuntimeError(f"ragcanary run answered {report['coverage']:.0%} of its canaries")
    return float(report["duration_s"]), command_s


def _check(answers: list[Any]) -> None:
    if any(len(a["hits"]) != DEPTH for a in answers):
        raise RuntimeError("a bare loop got an incomplete answer")


async def compare(shape: Shape, server: str, repeat: int) -> dict[str, Any]:
    """Rotating timings of our cycle and the three bare loops against one retriever."""
    timings = {name: Timings([], []) for name in ("ours", *BARE)}
    with RetrieverProcess(shape.latency_s, server) as retriever:
        config = retriever.target_config(concurrency=shape.concurrency)
        url = retriever.url
        suite = canaries(shape.queries)
        c = shape.concurrency
        transport = httpx_aiohttp.AiohttpTransport()
        async with (
            make_client(config) as ours,
            httpx.AsyncClient() as bare_httpx,
            httpx.AsyncClient(transport=transport) as bare_httpx_aiohttp,
            aiohttp.ClientSession() as session,
        ):
            cycles: list[tuple[Cycle, Timings]] = [
                (our_cycle(config, ours, suite, c), timings["ours"]),
                (bare_cycle(url, bare_httpx, suite, c), timings["httpx"]),
                (bare_cycle(url, bare_httpx_aiohttp, suite, c), timings["httpx_aiohttp"]),
                (bare_aiohttp_cycle(url, session, suite, c), timings["aiohttp"]),
            ]
            for cycle, _ in cycles:
                await cycle()  # warm-up: connections, imports, caches
            before = retriever.stats()
            cli: dict[str, list[float]] = {"cycle_s": [], "command_s": []}
            with_cli = shape == SHAPES[CLI_SHAPE] and server == CLI_SERVER
            for i in range(repeat):
                # Rotate who goes first so a slow spell on the machine hits all alike.
                for cycle, into in cycles[i % len(cycles) :] + cycles[: i % len(cycles)]:
                    await timed(cycle, into)
                if with_cli:
                    cycle_s, command_s = await asyncio.to_thread(ragcanary_run, shape, url)
                    cli["cycle_s"].append(cycle_s)
                    cli["command_s"].append(command_s)
            after = retriever.stats()
    served = after["served"] - before["served"]
    expected = (len(cycles) + with_cli) * repeat * shape.queries
    if served != expected:
        raise RuntimeError(f"the retriever answered {served} searches, not {expected}")
    walls = sum(sum(t.wall_s) for t in timings.values())
    return {
        "label": shape.label,
        "server": server,
        "queries": shape.queries,
        "concurrency": shape.concurrency,
        "latency_s": shape.latency_s,
        "ideal_s": shape.ideal_s,
        "repeat": repeat,
        "timings": {name: vars(t) for name, t in timings.items()},
        "cli": cli if with_cli else None,
        "retriever": {
            "cpu_per_search_us": (after["cpu_s"] - before["cpu_s"]) * 1e6 / served,
            "cpu_share": (after["cpu_s"] - before["cpu_s"]) / walls,
            "mean_latency_s": after["mean_latency_s"],
        },
    }


def run(quick: bool) -> dict[str, Any]:
    repeat = QUICK_REPEAT if quick else FULL_REPEAT
    results = []
    for shape in SHAPES:
        for server in SERVERS:
            result = asyncio.run(compare(shape, server, repeat))
            results.append(result)
            s = summary(result)
            print(
                f"  N={shape.queries} C={shape.concurrency} L={shape.latency_s * 1000:g} ms,"
                f" {server}: ours {s['ours_s']:.3f} s ({s['vs_ideal']:.2f}x ideal,"
                f" {s['vs_fastest']:.2f}x {s['fastest']}), "
                + ", ".join(f"{name} {s['bare_s'][name]:.3f} s" for name in BARE),
                flush=True,
            )
    return {"runs": results}


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """Medians, the goal ratios and CPU per query; ours / fastest is the median of the ratios
    of each round's pair (ours, the bare loop with the lowest median)."""
    t = result["timings"]
    queries = result["queries"]
    medians = {name: statistics.median(t[name]["wall_s"]) for name in t}
    fastest = min(BARE, key=lambda name: medians[name])
    pairs = zip(t["ours"]["wall_s"], t[fastest]["wall_s"], strict=True)
    return {
        "ours_s": medians["ours"],
        "bare_s": {name: medians[name] for name in BARE},
        "fastest": fastest,
        "vs_ideal": medians["ours"] / result["ideal_s"],
        "vs_fastest": statistics.median(o / b for o, b in pairs),
        "bare_vs_ideal": {name: medians[name] / result["ideal_s"] for name in BARE},
        "cpu_ms": {
            name: statistics.median(t[name]["cpu_s"]) * 1000 / queries for name in ("ours", *BARE)
        },
    }


def render(result: dict[str, Any]) -> str:
    rows, cpu_rows = [], []
    for one in result["runs"]:
        s = summary(one)
        shape = (
            f"{one['queries']:,} canaries, C = {one['concurrency']},"
            f" L = {one['latency_s'] * 1000:g} ms"
        )
        where = f"{shape}, {SERVERS[one['server']]}"
        rows.append(
            [
                where,
                f"{one['ideal_s']:.3f}",
                *(f"{s['bare_s'][name]:.3f} ({s['bare_vs_ideal'][name]:.2f}x)" for name in BARE),
                f"{s['ours_s']:.3f}",
                f"**{s['vs_ideal']:.3f}** ({verdict(s['vs_ideal'], GOAL_IDEAL)})",
                f"**{s['vs_fastest']:.3f}** ({verdict(s['vs_fastest'], GOAL_BARE)})",
            ]
        )
        retriever = one["retriever"]
        cpu_rows.append(
            [
                where,
                *(f"{s['cpu_ms'][name]:.2f}" for name in BARE),
                f"**{s['cpu_ms']['ours']:.2f}**",
                f"{retriever['cpu_per_search_us'] / 1000:.2f} ({retriever['cpu_share']:.0%})",
                f"{retriever['mean_latency_s'] * 1000:.2f}",
            ]
        )
    figures = table(
        [
            "cycle, retriever",
            "ideal s",
            *(f"{label} s (/ ideal)" for label in BARE.values()),
            "ours s",
            f"ours / ideal (goal ≤ {GOAL_IDEAL:.2f})",
            f"ours / fastest bare (goal ≤ {GOAL_BARE:.2f})",
        ],
        rows,
    )
    figures += "\n\nCPU of the client process per query (ms, medians), and the retriever's:\n\n"
    figures += table(
        [
            "cycle, retriever",
            *BARE.values(),
            "ours",
            "retriever ms per search (share of a core)",
            "retriever's measured L, ms",
        ],
        cpu_rows,
    )
    cli = [one for one in result["runs"] if one.get("cli")]
    if cli:
        one = cli[0]
        s = summary(one)
        cycle_s = statistics.median(one["cli"]["cycle_s"])
        command_s = statistics.median(one["cli"]["command_s"])
        fastest_s = s["bare_s"][s["fastest"]]
        figures += (
            f"\n\n`ragcanary run` itself, in its own process, {len(one['cli']['cycle_s'])} times"
            f" between the rounds above ({one['queries']:,} canaries, C = {one['concurrency']},"
            f" L = {one['latency_s'] * 1000:g} ms, {SERVERS[one['server']]}): its cycle"
            f" (`duration_s` of its report) {cycle_s:.3f} s, **{cycle_s / one['ideal_s']:.3f}x"
            f" the ideal** ({verdict(cycle_s / one['ideal_s'], GOAL_IDEAL)}) and"
            f" **{cycle_s / fastest_s:.3f}x the fastest bare loop** ({BARE[s['fastest']]},"
            f" {verdict(cycle_s / fastest_s, GOAL_BARE)}); the whole command, start-up, config"
            f" and evaluation included, {command_s:.3f} s, of which {command_s - cycle_s:.3f} s"
            " outside its cycle (importing, loading the config and suite, judging, writing the"
            " report)."
        )
    first = result["runs"][0]
    what = (
        "Wall time of one canary cycle of N queries at concurrency C against a retriever that"
        " answers every search after exactly L: the daemon's `run_suite` with an `HttpTarget`"
        " and the production `make_client` client (httpx's API over aiohttp, kept open across"
        " cycles as the daemon keeps it), against the ideal ⌈N / C⌉ · L and against three"
        " bare loops sending the same requests to the same retriever in the same process: an"
        " `asyncio.Semaphore(C)` and `json.loads` around `httpx.AsyncClient.post` with httpx's"
        " own transport, the same over `httpx_aiohttp.AiohttpTransport()`, and"
        " `aiohttp.ClientSession.post`. Each retriever (`bench/retriever.py`) runs in its own"
        f" process and sends one pre-built answer of {DEPTH} hits: a raw asyncio protocol, a"
        " Starlette app on uvicorn (asyncio loop and h11, as `pip install uvicorn` serves), and"
        f" an aiohttp web server. After one warm-up cycle each, {first['repeat']} rounds of the"
        " four cycles run in an order that rotates every round; the table shows medians, and"
        " ours / fastest bare is the median of the ratios of each round's pair."
    )
    return section(what, "cycle", figures, meaning(result))


def meaning(result: dict[str, Any]) -> str:
    parts = []
    for one in result["runs"]:
        s = summary(one)
        if one["label"] != SHAPES[0].label:
            continue
        goals = {
            "the ideal": s["vs_ideal"] <= GOAL_IDEAL,
            "the fastest bare loop": s["vs_fastest"] <= GOAL_BARE,
        }
        missed = [name for name, ok in goals.items() if not ok]
        outcome = (
            "both goals are met"
            if not missed
            else f"the goal against {' and '.join(missed)} is **missed**"
        )
        parts.append(
            f"Against {SERVERS[one['server']]}, {s['ours_s']:.3f} s: {s['vs_ideal']:.2f}x the"
            f" ideal and {s['vs_fastest']:.2f}x the fastest bare loop ({BARE[s['fastest']]}),"
            f" so {outcome}; bare httpx took {s['bare_vs_ideal']['httpx']:.2f}x the ideal and"
            f" {s['cpu_ms']['httpx']:.2f} ms of CPU per query, ours {s['cpu_ms']['ours']:.2f} ms."
        )
    budget_ms = SHAPES[0].ideal_s * 1000 / SHAPES[0].queries
    goal_runs = [summary(one) for one in result["runs"] if one["label"] == SHAPES[0].label]
    aiohttp_vs_ideal = [s["bare_vs_ideal"]["aiohttp"] for s in goal_runs]
    cpu = {name: max(s["cpu_ms"][name] for s in goal_runs) for name in ("ours", *BARE)}
    ours_vs_ideal = [s["vs_ideal"] for s in goal_runs]
    parts.append(
        f"The bare aiohttp loop took {min(aiohttp_vs_ideal):.2f} to"
        f" {max(aiohttp_vs_ideal):.2f}x the ideal here, ours {min(ours_vs_ideal):.2f} to"
        f" {max(ours_vs_ideal):.2f}x. Ours spent up to {cpu['ours']:.2f} ms of CPU per query,"
        f" the bare loop over the same aiohttp transport up to {cpu['httpx_aiohttp']:.2f} ms"
        f" and aiohttp alone up to {cpu['aiohttp']:.2f} ms; the difference from aiohttp alone"
        " is httpx's API (building and sending an `httpx.Request`, its response and stream"
        " wrappers), which the production client keeps; our runner and target adapter cost"
        " less than the target saves by building each request from its first"
        " (`probe.transport.JsonPosts`; the CPU section)."
        + (
            " Ours took less time than every bare loop all the same, because it keeps its"
            " request starts apart (below)."
            if all(s["vs_fastest"] < 1 for s in goal_runs)
            else ""
        )
    )
    return (
        f"For the issue's goal ({SHAPES[0].queries:,} canaries, C = {SHAPES[0].concurrency},"
        f" L = {SHAPES[0].latency_s * 1000:g} ms): "
        + " ".join(parts)
        + f" To finish within the ideal, the client's one event loop may spend at most"
        f" {budget_ms:.2f} ms of CPU per query, and the retriever shares the same two cores."
        " httpx's own transport spends most of its time in httpcore's connection pool, which"
        " checks every pooled connection whenever a request starts or a response closes"
        " (encode/httpcore#1035); aiohttp's connections cost about a third of that, which is"
        " why the production client is httpx over aiohttp (`ragcanary.probe.transport`): the"
        " same API, and every query outcome tested with it over real sockets"
        " (`tests/probe/test_transport.py`). Measuring against uvicorn needs care: a server"
        " socket made without `IPPROTO_TCP` (uvicorn's own `--fd` and `--workers` binding)"
        " keeps Nagle's algorithm on, and every answer then waits 40 ms for the client's"
        " delayed ACK whatever the client; the retrievers here bind as `uvicorn --host --port`"
        " does. A run keeps its request starts apart (`probe/runner.py`, `Pacer`): the first C"
        " over 10 ms in all, then at least 0.8 of the fastest answer's latency over C, which"
        " is below the spacing C queries in flight leave on average and so never lowers the"
        " run's rate; only where that gap is under a millisecond (here at C = 32 and L = 20 ms,"
        " not at C = 20 and L = 50 ms), since each paced start costs the event loop a wake-up:"
        " 11% more CPU per query at C = 32, and at C = 8 25-35% more for a run 2.5% shorter."
        " Each paced start waits on a Linux timerfd in the event loop's own epoll set"
        " (`probe/timer.py`), because asyncio wakes for its timers in whole milliseconds,"
        " rounded up: measured on 2026-11-28 against the uvicorn retriever, two thirds of the"
        " starts of a 1,000-canary cycle waited (666 of 1,000), on asyncio's timers 0.53 ms"
        " too long on average and on the timerfd 0.17-0.26 ms (the loop was busy). With the"
        " timerfd and the share retuned from 0.6 to 0.8 (0.7 to 0.9 alike), `ragcanary run`'s"
        " cycle took 1.076x the ideal against the uvicorn retriever, 1.062x against the raw"
        " one and 1.070x against aiohttp, where it took 1.095x, 1.099x and 1.098x before"
        " (medians of 10-12 runs of each, alternated)."
        " The bare loops send their first C queries at once and the next as soon"
        " as a slot is free. Queries sent together come back together from a retriever that"
        " answers in constant time; the client handles those answers in turn, each late by"
        " the ones before it, and the late ones send their next queries together again, so"
        " such trains grow over a run. Measured on 2026-11-26 with a bare aiohttp loop of 32"
        " workers started evenly over one latency, against the raw retriever: the mean"
        " latency of each round rose from 21.1-22.0 ms in the first rounds to 24-26 ms in the"
        " middle ones; kept 0.4 ms apart, every round stayed at 20.7-21.3 ms. Our cycle took"
        " 1.14-1.22x the ideal with only its first round spread, 1.10-1.11x paced (on"
        " asyncio's timers). What is left between ours and the ideal is the retriever's timers"
        " (its measured L in the second table: an event loop wakes to the millisecond), the"
        " waits that keep the starts apart, and CPU on a shared machine: the client's, the"
        " retriever's (its share of a core is in the second table) and other processes' (see"
        " the load average). A cycle that follows a pause pays more: measured on 2026-11-28"
        " against the uvicorn retriever, our cycle (then on asyncio's timers) took 1.10x the"
        " ideal run back to back and 1.12-1.14x after both processes sat idle 1 s (1.10x when"
        " the client spun instead of sleeping), all of it in the first round, whose answers"
        " took 26-28 ms against 21.2 ms later: an idle core wakes slowly on this virtual"
        " machine. `ragcanary run` starts its cycle after its own start-up, a daemon's runs"
        " after a pause, and the rounds here rotate without one. Tried the same day without"
        " gain, in `ragcanary run`'s own cycle: uvloop 0.23 as its event loop (1.096x against"
        " 1.098x, 10 alternated runs each), the first C starts spread over 15 or 20 ms instead"
        " of 10 (1.097-1.098x, 16 runs each) and, on asyncio's timers, `PACE` from 0.4 to 0.9"
        " (0.6 best, 8 runs each). The timerfd tried then with `PACE` kept at 0.6 was 1-1.5%"
        " sooner, within this machine's noise; only with the share retuned did it gain 2-4%."
    )
