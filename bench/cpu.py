"""Benchmark: CPU per canary query spent in our own code, everything except the HTTP exchange.

The exchange is measured away rather than guessed: both our cycle and the bare httpx loop of
``bench/cycle.py`` run over the same ``httpx.MockTransport``, which hands every request the
retriever's pre-built answer without a socket. What ours costs on top of the bare loop is
the runner, the target adapter (request template, JMESPath, validation) and the result
objects. The rest of a daemon run (evaluate against a baseline, the report, the exporter
and the SQLite store) is timed after it on the run it produced, and divided by its queries.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
from cycle import Cycle, bare_cycle, canaries, our_cycle
from render import section, table
from retriever import DEPTH, SEARCH_BODY

from ragcanary.config.model import SuiteConfig, TargetConfig
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import RunResult
from ragcanary.reports.report import to_report
from ragcanary.serve.exporter import Exporter, SuitePairs
from ragcanary.store.storage import Store

TITLE = "CPU per query"
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


def run(quick: bool) -> dict[str, Any]:
    repeat = QUICK_REPEAT if quick else FULL_REPEAT
    ours, bare, baseline, current = asyncio.run(_exchange(repeat))
    suite_config = SuiteConfig(cases="bench.yaml", targets=["bench"], k=[1, 3, 5, 10], depth=DEPTH)
    exporter = Exporter()
    exporter.load({"bench": SuitePairs(("bench",), (1, 3, 5, 10))})
    steps: dict[str, list[float]] = {"evaluate": [], "report": [], "exporter": [], "store": []}
    with tempfile.TemporaryDirectory() as tmp, Store.from_url(f"sqlite:///{tmp}/b.db") as store:
        store.migrate()
        for _ in range(repeat):
            spent, evaluation = cpu_s(partial(evaluate, current, suite_config, baseline))
            steps["evaluate"].append(spent)
            spent, report = cpu_s(partial(to_report, evaluation))
            steps["report"].append(spent)
            steps["exporter"].append(cpu_s(partial(exporter.observe_run, report))[0])
            report["run_id"] += f"-{len(steps['store'])}"  # each stored run needs its own id
            steps["store"].append(cpu_s(partial(store.save_run, report))[0])
    per_query = {
        name: statistics.median(times) * 1e6 / QUERIES
        for name, times in {"ours": ours, "bare": bare, **steps}.items()
    }
    print("  " + ", ".join(f"{name} {us:.0f} µs" for name, us in per_query.items()))
    return {"queries": QUERIES, "concurrency": CONCURRENCY, "repeat": repeat, "us": per_query}


def render(result: dict[str, Any]) -> str:
    us = result["us"]
    runner = us["ours"] - us["bare"]
    rest = us["evaluate"] + us["report"] + us["exporter"] + us["store"]
    rows = [
        ["the bare httpx loop (reference: request, response, json.loads)", f"{us['bare']:.0f}"],
        ["our cycle (`run_suite` + `HttpTarget`)", f"{us['ours']:.0f}"],
        ["**our runner and target adapter** (ours minus bare)", f"**{runner:.0f}**"],
        ["`evaluate` against a baseline (scores, drift, statistics)", f"{us['evaluate']:.0f}"],
        ["`to_report`", f"{us['report']:.0f}"],
        ["`Exporter.observe_run`", f"{us['exporter']:.0f}"],
        ["`Store.save_run` (SQLite)", f"{us['store']:.0f}"],
        ["**all our code per query** (runner and adapter + the rest)", f"**{runner + rest:.0f}**"],
    ]
    figures = table(["CPU per query", "µs"], rows)
    what = (
        f"Process CPU time (`time.process_time`) per query of a {result['queries']:,}-canary"
        f" cycle at C = {result['concurrency']}, median of {result['repeat']} interleaved"
        " repeats. Our cycle (`run_suite` + `HttpTarget`, as in the cycle section) and the"
        " bare httpx loop both run over the same `httpx.MockTransport`, which returns the"
        " retriever's pre-built answer without a socket, so their difference is our runner and"
        " target adapter alone. The daemon's remaining per-run work is then timed on the run"
        " our cycle produced, judged against the previous one: `evaluate`, `to_report`,"
        " `Exporter.observe_run` and `Store.save_run` into a SQLite file."
    )
    share = runner / us["bare"] if us["bare"] else 0.0
    meaning = (
        f"Our runner and target adapter add {runner:.0f} µs of CPU to each query, {share:.0%}"
        f" of what httpx alone spends on the same exchange ({us['bare']:.0f} µs without any"
        " network); the HTTP client, not our code, is the larger cost of a cycle, and over real"
        " sockets httpx costs more again (the cycle section gives both processes' CPU per"
        f" query). Judging, reporting, exporting and storing the run add {rest:.0f} µs per"
        f" query, {us['evaluate'] / rest:.0%} of it `evaluate` (its cost by suite size is in"
        " the evaluation section)."
    )
    return section(what, "cpu", figures, meaning)
