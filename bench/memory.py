"""Benchmark: the daemon's memory over 1,000 runs back to back, after a warm-up.

Each run is ``Daemon.run_now``, the daemon's whole per-run work: the baseline lookup,
``run_suite`` against a local retriever (``bench/retriever.py``, answering at once) over the
production client, ``evaluate`` against the pinned baseline, the report, the exporter update,
the SQLite store and the log line (JSON, to /dev/null). Only the scheduler's waits are left
out. The reference is the process itself after the warm-up runs: growth is measured from
there, in resident memory (/proc VmRSS) and in Python allocations (tracemalloc), whose
largest growing sites are listed so that a leak names its line.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from render import section, table, verdict
from retriever import DEPTH, RetrieverProcess

from ragcanary.logs import configure_logging
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.suites.loaded import load_config

TITLE = "Memory over 1,000 runs"
GOAL_MIB = 5.0
CASES = 10
FULL_RUNS, QUICK_RUNS = 1000, 300
# The first runs fill caches (SQLite's page cache per connection among them), the connection
# pools and the allocator's arenas; on 2 CPUs resident memory settles within about 90 runs.
WARMUP = 100
CHECKPOINTS = 10
TOP_SITES = 5


def rss_mib() -> float:
    """This process's resident memory, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status: this benchmark needs Linux")


def write_config(directory: Path, url: str) -> Path:
    """One suite of CASES labelled canaries against the local retriever, stored in SQLite."""
    cases = [
        {"id": f"case-{i}", "query": f"canary {i}", "relevant": [f"doc-{i % (DEPTH + 2)}"]}
        for i in range(CASES)
    ]
    (directory / "canaries.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{directory}/ragcanary.db",
        "targets": {"search": {"url": url, "body": {"q": "{query}", "k": "{k}"}, "retries": 0}},
        "suites": {"canaries": {"cases": "canaries.json", "targets": ["search"]}},
    }
    path = directory / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    return path


async def _measure(runs: int, daemon: Daemon) -> dict[str, Any]:
    warmup = WARMUP
    every = (runs - warmup) // CHECKPOINTS
    await daemon.keeper.ensure_schema()
    daemon.exporter.load(suite_pairs(daemon.loaded))
    key = JobKey("canaries", "search")
    outcomes: dict[str, int] = {}
    samples: list[dict[str, float]] = []
    # Traced from the start, so that tracemalloc's own bookkeeping, which is resident memory
    # too, has settled with the warm-up rather than counting as growth after it.
    tracemalloc.start()
    started = time.perf_counter()
    for done in range(1, runs + 1):
        report = await daemon.run_now(key)
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
        if done == warmup:
            first = tracemalloc.take_snapshot()
        if done >= warmup and (done - warmup) % every == 0:
            traced = tracemalloc.get_traced_memory()[0]
            samples.append({"run": done, "rss_mib": rss_mib(), "traced_mib": traced / 2**20})
    seconds = time.perf_counter() - started
    # tracemalloc's own snapshots are not the daemon's memory.
    own = [tracemalloc.Filter(False, tracemalloc.__file__)]
    last = tracemalloc.take_snapshot().filter_traces(own)
    grown = last.compare_to(first.filter_traces(own), "lineno")
    tracemalloc.stop()
    await daemon.shutdown()
    sites = [
        {"site": str(stat.traceback[0]), "kib": stat.size_diff / 1024, "blocks": stat.count_diff}
        for stat in grown[:TOP_SITES]
    ]
    return {
        "runs": runs,
        "warmup": warmup,
        "cases": CASES,
        "outcomes": outcomes,
        "ms_per_run": seconds * 1000 / runs,
        "samples": samples,
        "sites": sites,
    }


def run(quick: bool) -> dict[str, Any]:
    with (
        RetrieverProcess(0.0) as retriever,
        tempfile.TemporaryDirectory() as tmp,
        open(os.devnull, "w", encoding="utf-8") as sink,
    ):
        path = write_config(Path(tmp), retriever.url)
        daemon = Daemon(path, {}, load_config(path, {}))
        configure_logging("info", "json", daemon.redactor, sink)
        result = asyncio.run(_measure(QUICK_RUNS if quick else FULL_RUNS, daemon))
    start, end = result["samples"][0], result["samples"][-1]
    print(
        f"  {result['runs']} runs, {result['ms_per_run']:.0f} ms each: RSS {start['rss_mib']:.1f}"
        f" -> {end['rss_mib']:.1f} MiB, traced {end['traced_mib'] - start['traced_mib']:+.2f} MiB"
    )
    return result


def render(result: dict[str, Any]) -> str:
    samples = result["samples"]
    start, end = samples[0], samples[-1]
    growth = end["rss_mib"] - start["rss_mib"]
    traced = end["traced_mib"] - start["traced_mib"]
    figures = table(
        ["after run", "VmRSS MiB", "growth MiB", "tracemalloc MiB"],
        [
            [
                f"{s['run']:,}",
                f"{s['rss_mib']:.1f}",
                f"{s['rss_mib'] - start['rss_mib']:+.2f}",
                f"{s['traced_mib']:.2f}",
            ]
            for s in samples
        ],
    )
    figures += "\n\nThe allocation sites that grew most between the first and the last row:\n\n"
    figures += table(
        ["site", "KiB", "blocks"],
        [[f"`{s['site']}`", f"{s['kib']:+.1f}", f"{s['blocks']:+d}"] for s in result["sites"]],
    )
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in sorted(result["outcomes"].items()))
    what = (
        f"{result['runs']:,} runs of one suite of {result['cases']} labelled canaries, back to"
        " back, each the daemon's whole per-run work (`Daemon.run_now`: baseline lookup,"
        " `run_suite` over the production client against `bench/retriever.py` answering at"
        " once, `evaluate` against the pinned baseline, report, exporter update, SQLite store"
        " and the JSON log line, written to /dev/null); no scheduler waits. The first"
        f" {result['warmup']} runs are the warm-up. The reference is the process right after"
        " it: resident memory (VmRSS) and Python allocations (tracemalloc, on from the start so"
        " that its own bookkeeping has settled by then) are sampled every"
        f" {samples[1]['run'] - start['run']} runs. Outcomes: {outcomes};"
        f" {result['ms_per_run']:.0f} ms per run."
    )
    meaning = (
        f"Over {end['run'] - start['run']:,} runs after the warm-up resident memory grew by"
        f" {growth:+.2f} MiB ({verdict(growth, GOAL_MIB)} the goal of ≤ {GOAL_MIB:g} MiB) and"
        f" the memory Python allocations hold by {traced:+.2f} MiB. The allocation sites above"
        " show where any growth comes from; sites in SQLite or httpx that stop growing after"
        " a few hundred runs are caches filling up, not leaks."
    )
    return section(what, "memory", figures, meaning)
