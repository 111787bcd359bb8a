"""Benchmark: CPU per canary query of all our code: probe, evaluate, report, export, store.

The probe is timed twice. Over real sockets, our cycle with the production client against
the raw retriever of ``bench/retriever.py`` (its own process), interleaved with the bare
aiohttp loop of ``bench/cycle.py``: what a query costs the daemon's process, HTTP included.
And over ``httpx.MockTransport``, which hands every request the retriever's pre-built answer
without a socket, interleaved with the bare httpx loop over the same mock: what ours costs on
top of it is the runner, the target adapter (request template, JMESPath, validation) and the
result objects alone. The rest of a daemon run (evaluate against a baseline, the report, the
exporter and the SQLite store) is timed after it on the run it produced, divided by its
queries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import aiohttp
import httpx
from cycle import Cycle, bare_aiohttp_cycle, bare_cycle, canaries, our_cycle
from render import section, table, verdict
from retriever import DEPTH, SEARCH_BODY, RetrieverProcess

from ragcanary.config.model import SuiteConfig
from ragcanary.config.target import TargetConfig
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import build_report
from ragcanary.probe.target import make_client
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs
from ragcanary.store.storage import Store
from ragcanary.suites.judge import settings_for

TITLE = "CPU per query"
GOAL_US = 800  # all our code per query: probe (HTTP included), evaluate, report, export, store
LATENCY_S = 0.020
QUERIES = 1000
CONCURRENCY = 32
URL = "http://retriever.invalid/search"
FULL_REPEAT = 7
QUICK_REPEAT = 2


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=SEARCH_BODY, headers={"Content-Type": "application/json"})


def cpu_s(call: Callable[[], Any]) -> tuple[float, Any]:
    """Process CPU seconds of ``call()``, and what it returned."""
    started = time.process_time()
    result = call()
    return time.process_time() - started, result


async def _exchange(repeat: int) -> tuple[list[float], list[float], RunResult, RunResult]:
    """CPU seconds of each cycle of ours and of the bare loop, interleaved, and two of our runs."""
    suite = canaries(QUERIES)
    config = TargetConfig(url=URL, body={"q": "{query}", "k": "{k}"}, retries=0)
    transport = httpx.MockTransport(_answer)
    async with httpx.AsyncClient(transport=transport) as client:
        mine = our_cycle(config, client, suite, CONCURRENCY)
        theirs = bare_cycle(URL, client, suite, CONCURRENCY)
        baseline = await mine()  # also the warm-up, with the bare loop's:
        await theirs()
        ours, bare = [], []
        for i in range(repeat):
            order: list[tuple[Cycle, list[float]]] = [(mine, ours), (theirs, bare)]
            for cycle, into in order if i % 2 == 0 else reversed(order):
                started = time.process_time()
                run = await cycle()
                into.append(time.process_time() - started)
                if cycle is mine:
                    current = run
    return ours, bare, baseline, current


async def _over_sockets(repeat: int) -> tuple[list[float], list[float]]:
    """CPU seconds of our cycle (production client) and of the bare aiohttp loop, interleaved,
    against the raw retriever in its own process."""
    suite = canaries(QUERIES)
    with RetrieverProcess(LATENCY_S) as retriever:
        config = retriever.target_config(concurrency=CONCURRENCY)
        async with make_client(config) as client, aiohttp.ClientSession() as session:
            mine = our_cycle(config, client, suite, CONCURRENCY)
            theirs = bare_aiohttp_cycle(retriever.url, session, suite, CONCURRENCY)
            await mine()
            await theirs()
            ours: list[float] = []
            bare: list[float] = []
            for i in range(repeat):
                order: list[tuple[Cycle, list[float]]] = [(mine, ours), (theirs, bare)]
                for cycle, into in order if i % 2 == 0 else reversed(order):
                    started = time.process_time()
                    await cycle()
                    into.append(time.process_time() - started)
    return ours, bare


def run(quick: bool) -> dict[str, Any]:
    repeat = QUICK_REPEAT if quick else FULL_REPEAT
    ours, bare, baseline, current = asyncio.run(_exchange(repeat))
    socket_ours, socket_bare = asyncio.run(_over_sockets(repeat))
    suite_config = SuiteConfig(cases="bench.yaml", targets=["bench"], k=[1, 3, 5, 10], depth=DEPTH)
    settings = settings_for(suite_config)
    exporter = Exporter()
    exporter.load({"bench": SuitePairs(("bench",), (1, 3, 5, 10))})
    steps: dict[str, list[float]] = {"evaluate": [], "report": [], "exporter": [], "store": []}
    with tempfile.TemporaryDirectory() as tmp, Store.from_url(f"sqlite:///{tmp}/b.db") as store:
        store.migrate()
        for _ in range(repeat):
            spent, evaluation = cpu_s(partial(evaluate, current, settings, baseline))
            steps["evaluate"].append(spent)
            spent, report = cpu_s(partial(build_report, evaluation))
            steps["report"].append(spent)
            steps["exporter"].append(cpu_s(partial(exporter.observe_run, report))[0])
            # Each stored run needs its own id.
            report = dataclasses.replace(report, run_id=f"{report.run_id}-{len(steps['store'])}")
            steps["store"].append(cpu_s(partial(store.save_run, report))[0])
    measured = {
        "ours": ours,
        "bare": bare,
        "socket_ours": socket_ours,
        "socket_bare": socket_bare,
        **steps,
    }
    per_query = {name: statistics.median(times) * 1e6 / QUERIES for name, times in measured.items()}
    print("  " + ", ".join(f"{name} {us:.0f} µs" for name, us in per_query.items()))
    return {"queries": QUERIES, "concurrency": CONCURRENCY, "repeat": repeat, "us": per_query}


def render(result: dict[str, Any]) -> str:
    us = result["us"]
    runner = us["ours"] - us["bare"]
    rest = us["evaluate"] + us["report"] + us["exporter"] + us["store"]
    total = us["socket_ours"] + rest
    rows = [
        ["the bare aiohttp loop over sockets (reference)", f"{us['socket_bare']:.0f}"],
        [
            "**probe**: our cycle over sockets, production client (HTTP included)",
            f"**{us['socket_ours']:.0f}**",
        ],
        ["the bare httpx loop over `MockTransport` (reference: no socket)", f"{us['bare']:.0f}"],
        ["our cycle over `MockTransport`", f"{us['ours']:.0f}"],
        [
            "our runner and target adapter alone (the two above, ours minus bare)",
            f"{runner:.0f}"
            if runner > 0
            else f"{runner:.0f} (our requests cost less to build than `client.post`'s)",
        ],
        ["`evaluate` against a baseline (scores, drift, statistics)", f"{us['evaluate']:.0f}"],
        ["`build_report`", f"{us['report']:.0f}"],
        ["`Exporter.observe_run`", f"{us['exporter']:.0f}"],
        ["`Store.save_run` (SQLite)", f"{us['store']:.0f}"],
        [
            f"**all our code per query** (probe + the four above; goal ≤ {GOAL_US} µs)",
            f"**{total:.0f}** ({verdict(total, GOAL_US)})",
        ],
    ]
    figures = table(["CPU per query", "µs"], rows)
    what = (
        f"Process CPU time (`time.process_time`) per query of a {result['queries']:,}-canary"
        f" cycle at C = {result['concurrency']}, median of {result['repeat']} interleaved"
        " repeats. The probe over sockets is our cycle (`run_suite` + `HttpTarget` + the"
        " production client, as in the cycle section) against the raw retriever of"
        f" `bench/retriever.py` in its own process answering after {LATENCY_S * 1000:g} ms,"
        " interleaved with the bare aiohttp loop. Over `httpx.MockTransport`, which returns"
        " the retriever's pre-built answer without a socket, our cycle and the bare httpx loop"
        " differ only by our runner and target adapter. The daemon's remaining per-run work"
        " is then timed on the run our cycle produced, judged against the previous one:"
        " `evaluate`, `build_report`, `Exporter.observe_run` and `Store.save_run` into a SQLite"
        " file."
    )
    share = runner / us["bare"] if us["bare"] else 0.0
    meaning = (
        f"All our code costs {total:.0f} µs of CPU per query ({verdict(total, GOAL_US)} the"
        f" goal of {GOAL_US} µs): the probe {us['socket_ours']:.0f} µs over real sockets"
        f" ({us['socket_ours'] / us['socket_bare']:.1f}x the bare aiohttp loop's"
        f" {us['socket_bare']:.0f} µs), and judging, reporting, exporting and storing the run"
        f" {rest:.0f} µs, {us['evaluate'] / rest:.0%} of it `evaluate` (its cost by suite size"
        f" is in the evaluation section). The retriever answers alike every time, like an"
        " unchanged one, so no case moved against the previous run and `evaluate` skips the"
        " bootstrap's resampling (every interval is (0, 0)); with a handful moved it counts"
        " their draws (`measure/stats.py`), and the evaluation section times suites where a"
        " quarter of the cases moved. Of the probe, our runner and target adapter add"
        + (
            f" {runner:.0f} µs ({share:.0%} of what httpx alone spends without any network,"
            f" {us['bare']:.0f} µs)"
            if runner > 0
            else f" nothing measurable: our cycle over the mock costs {-runner:.0f} µs less"
            " per query than the bare httpx loop, because a target builds each request from its"
            " first (`probe.transport.JsonPosts`) where `client.post` merges and checks the"
            " client's headers again every time, and that saves more than the runner and"
            " adapter cost"
        )
        + "; the rest is the HTTP client. The daemon's own CPU per canary, everything included"
        " and measured from outside, is in the scale section."
    )
    return section(what, "cpu", figures, meaning)
