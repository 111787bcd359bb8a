"""Benchmark: a Prometheus scrape of a daemon watching 200 (suite, target) pairs.

A daemon is built from a generated config of 20 suites x 10 targets (k = [1, 3, 5, 10]) and
its exporter fed run reports as after real runs, histograms included; between two scrapes the
runs of a few pairs end. Timed: the exposition in this process, ``GET /metrics`` over HTTP from
the same daemon's API served by uvicorn in its own process, and, as the reference,
``generate_latest`` on a registry of plain Gauges with as many series.

    .venv/bin/python bench/scrape.py serve    # the API process: prints its URL, serves
"""

from __future__ import annotations

import dataclasses
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from evaluation import build_runs
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from render import section, table, verdict

from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.run_report import build_report
from ragcanary.serve.daemon import Daemon, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.suites.judge import settings_for
from ragcanary.suites.loaded import load_config

TITLE = "Scrape time"
GOAL_MS = 50.0
SUITES, TARGETS, CASES = 20, 10, 50
KS = [1, 3, 5, 10]
RUNS_PER_PAIR = 3  # reports observed per pair, so histograms hold a few runs
CHANGED_PER_SCRAPE = (
    10  # runs ending between two scrapes: 200 pairs every 5 min, scraped every 15 s
)
RUNS_ROUTE = "/bench/runs"
FULL_REPEAT = 41
QUICK_REPEAT = 11


def write_config(directory: Path) -> Path:
    """A ragcanary.yaml of SUITES suites, each run against all TARGETS targets."""
    cases = [
        {"id": f"case-{i:05d}", "query": f"query {i}", "relevant": [f"doc-{i}-0"]}
        for i in range(CASES)
    ]
    (directory / "suite.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    targets = {
        f"target-{t}": {"url": f"http://127.0.0.1:9/search/{t}", "body": {"q": "{query}"}}
        for t in range(TARGETS)
    }
    suites = {
        f"suite-{s}": {"cases": "suite.json", "targets": list(targets), "k": KS, "every": "5m"}
        for s in range(SUITES)
    }
    config = {"storage": f"sqlite:///{directory}/ragcanary.db", "targets": targets}
    path = directory / "ragcanary.yaml"
    path.write_text(json.dumps(config | {"suites": suites}), encoding="utf-8")  # JSON is YAML
    return path


class Runs:
    """Feeds a daemon's exporter run reports of its pairs in turn, as finished runs would."""

    def __init__(self, daemon: Daemon) -> None:
        suites = daemon.loaded.config.suites
        baseline, current = build_runs(CASES)
        self._report = build_report(evaluate(current, settings_for(suites["suite-0"]), baseline))
        self._pairs = [(suite, target) for suite, cfg in suites.items() for target in cfg.targets]
        self._exporter = daemon.exporter
        self._done = 0

    def finish(self, count: int) -> None:
        """Observe ``count`` more runs, each of the pair after the last one's."""
        for _ in range(count):
            suite, target = self._pairs[self._done % len(self._pairs)]
            duration = 1.0 + self._done % 7  # runs land in different histogram buckets
            self._exporter.observe_run(
                dataclasses.replace(self._report, suite=suite, target=target, duration_s=duration)
            )
            self._done += 1


def filled_daemon(directory: Path) -> tuple[Daemon, Runs]:
    """A daemon (not started) whose exporter holds RUNS_PER_PAIR runs of every pair."""
    path = write_config(directory)
    loaded = load_config(path, {})
    daemon = Daemon(path, {}, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    runs = Runs(daemon)
    runs.finish(RUNS_PER_PAIR * SUITES * TARGETS)
    return daemon, runs


def reference_registry(families: int, series: int) -> CollectorRegistry:
    """Plain labelled Gauges: ``families`` metrics sharing ``series`` series between them."""
    registry = CollectorRegistry()
    for f in range(families):
        gauge = Gauge(
            f"reference_{f}", "A plain gauge.", ("suite", "target", "k"), registry=registry
        )
        for i in range(f, series, families):
            gauge.labels(f"suite-{i % SUITES}", f"target-{i % TARGETS}", str(i)).set(i / 7)
    return registry


def count(text: bytes) -> tuple[int, int]:
    """Metric families and series (sample lines) in an exposition."""
    lines = text.decode().splitlines()
    return sum(1 for line in lines if line.startswith("# TYPE")), sum(
        1 for line in lines if line and not line.startswith("#")
    )


def timed_ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


class ApiProcess:
    """``bench/scrape.py serve`` in a subprocess; ``url`` once entered."""

    def __enter__(self) -> ApiProcess:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "serve"], stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the API process exited before printing its URL")
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def run(quick: bool) -> dict[str, Any]:
    repeat = QUICK_REPEAT if quick else FULL_REPEAT
    with tempfile.TemporaryDirectory() as tmp:
        daemon, runs = filled_daemon(Path(tmp))
        exporter = daemon.exporter
        ours = exporter.exposition()
        families, series = count(ours)
        reference = reference_registry(families, series)
        if count(generate_latest(reference)) != (families, series):
            raise RuntimeError("the reference registry does not match ours in size")
        timings: dict[str, list[float]] = {"reference": [], "full": [], "scrape": []}
        for _ in range(repeat + 1):  # the first round is the warm-up; the three kinds alternate
            timings["reference"].append(timed_ms(lambda: generate_latest(reference)))
            timings["full"].append(timed_ms(lambda: generate_latest(exporter.registry)))
            runs.finish(CHANGED_PER_SCRAPE)  # not timed: the exporter's work at each run's end
            timings["scrape"].append(timed_ms(exporter.exposition))
    with ApiProcess() as api, httpx.Client() as client:

        def scrape() -> None:
            response = client.get(api.url)
            response.raise_for_status()
            if count(response.content) != (families, series):
                raise RuntimeError("the API's /metrics differs from the in-process exposition")

        timings["http"] = []
        for _ in range(repeat + 1):
            client.post(api.url.replace("/metrics", RUNS_ROUTE)).raise_for_status()
            timings["http"].append(timed_ms(scrape))
    result = {
        "pairs": SUITES * TARGETS,
        "families": families,
        "series": series,
        "buckets": ours.count(b"_bucket{"),
        "bytes": len(ours),
        "changed": CHANGED_PER_SCRAPE,
        "repeat": repeat,
        **{f"{name}_ms": statistics.median(times[1:]) for name, times in timings.items()},
    }
    print(
        f"  {series:,} series: reference {result['reference_ms']:.1f} ms, full render"
        f" {result['full_ms']:.1f} ms, scrape {result['scrape_ms']:.1f} ms,"
        f" GET /metrics {result['http_ms']:.1f} ms"
    )
    return result


def render(result: dict[str, Any]) -> str:
    ref, http = result["reference_ms"], result["http_ms"]
    changed = result["changed"]
    rows = [
        ("reference: `generate_latest`, plain Gauges, as many series", ref, ""),
        ("`generate_latest(exporter.registry)`: every pair rendered", result["full_ms"], ""),
        (
            f"`exporter.exposition()`, {changed} pairs changed since the last",
            result["scrape_ms"],
            "",
        ),
        (f"`GET /metrics` over HTTP, {changed} pairs changed since the last", http, "goal"),
    ]
    figures = table(
        ["what", "ms (median)", "ratio to the reference", f"goal ≤ {GOAL_MS:g} ms"],
        [
            [what, f"{ms:.1f}", f"{ms / ref:.2f}", verdict(ms, GOAL_MS) if goal else ""]
            for what, ms, goal in rows
        ],
    )
    what = (
        f"One Prometheus scrape of a daemon with {result['pairs']} (suite, target) pairs (20"
        " suites x 10 targets, k = [1, 3, 5, 10], per-case series off as by default), whose"
        f" exporter was fed {RUNS_PER_PAIR} run reports per pair as after real runs:"
        f" {result['families']} metric families, {result['series']:,} series"
        f" ({result['buckets'] / result['series']:.0%} of them histogram buckets),"
        f" {result['bytes'] / 1024:.0f} KiB. Between two scrapes {changed} pairs finish a run"
        f" ({result['pairs']} pairs every 5 minutes, scraped every 15 s); their reports are fed"
        " to the exporter untimed, as the daemon does when a run ends. Timed: the exposition in"
        " this process, and `GET /metrics` from the same daemon's API served by uvicorn in its"
        " own process (the client in this one), against the reference, `generate_latest` on a"
        " registry of plain labelled Gauges with as many families and series. Medians of"
        f" {result['repeat']} after a warm-up; the in-process kinds alternate."
    )
    meaning = (
        f"A scrape over HTTP takes {http:.1f} ms, {http / ref:.2f} times the reference:"
        f" {verdict(http, GOAL_MS)} the goal of {GOAL_MS:g} ms. Rendering every series costs"
        f" {result['full_ms'] / ref:.2f} times what prometheus_client needs for plain Gauges,"
        f" {result['full_ms']:.0f} ms at this size, so the exporter keeps each pair's"
        " series in a registry of its own and caches its text until one of them changes"
        " (`ragcanary.serve.metrics.exposition`). A pair's text is rendered again as its run ends"
        " (`Exporter.observe_run`, here in the untimed feeding), so a scrape only joins cached"
        " texts; until 2026-11-26 the scrape rendered the pairs that ran since the last one"
        " itself, which at 200 jobs a minute cost 25 to 60 ms on the daemon's busy event loop"
        " (the scale section). The first scrape after a start or a reload renders everything"
        " once, as the full-render row does."
    )
    return section(what, "scrape", figures, meaning)


def _serve() -> None:
    """The API of a filled daemon, served as ``ragcanary serve`` configures uvicorn.

    One route is added for the benchmark: ``POST /bench/runs`` finishes CHANGED_PER_SCRAPE
    runs, so that the client can let runs end between two timed scrapes.
    """
    with tempfile.TemporaryDirectory() as tmp:
        daemon, runs = filled_daemon(Path(tmp))
        app = create_app(daemon.service)

        @app.post(RUNS_ROUTE)
        async def finish_runs() -> None:  # on the event loop, where the daemon's runs end
            runs.finish(CHANGED_PER_SCRAPE)

        # Listening already: a scrape that arrives before uvicorn accepts waits in the backlog.
        listener = socket.create_server(("127.0.0.1", 0))
        host, port = listener.getsockname()[:2]
        print(f"http://{host}:{port}/metrics", flush=True)
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    _serve()
