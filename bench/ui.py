"""Benchmark: the web pages (/ui/) over a store of 1,000 canaries run every 5 minutes for 30 days.

The store is filled as the history benchmark fills it (in bulk, exactly the rows
``Store.save_run`` writes: ``bulk``), but each run carries a whole run-level report: metrics
per tag, the baseline comparison with p-values and intervals, a verdict's failures and
regressions; the last two days are regressions and the first run is the pinned baseline. A
daemon is built on that store and its config (not started: no scheduler), and each page is
requested through the app itself (httpx's ASGI transport), so the time is the server's:
routing, storage reads, the page's computation and rendering, without a network. Each page
is also measured in bytes, with the scripts and stylesheets it loads. The fleet page is timed
once more with 50 pairs. The candidates page lists the first page of 10,000 pending failure
reports and asks a retriever that answers at once (its own process) for the live results of
the first 20.

    .venv/bin/python bench/run.py ui            # what docs/performance.md reports
    .venv/bin/python bench/ui.py --backend sqlite --canaries 200    # one-off scales
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bulk
import httpx
from history import (
    DAYS,
    DEPTH,
    EVERY_S,
    KS,
    VARIANTS,
    Canary,
    canaries,
    database,
    postgres_unreachable,
    run_head,
)
from render import section, table, verdict
from retriever import RetrieverProcess
from sqlalchemy.pool import NullPool

from ragcanary.config.target import TargetConfig
from ragcanary.measure.case_verdict import RunFindings
from ragcanary.measure.metrics import aggregate
from ragcanary.measure.report_json import unmarshal
from ragcanary.measure.run_report import RunReport
from ragcanary.probe.target import make_client
from ragcanary.serve.daemon import Daemon
from ragcanary.serve.http.api import create_app
from ragcanary.store.engine import make_engine
from ragcanary.store.schema import baselines, candidates
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import load_config

TITLE = "Web pages"
GOAL_MS = 200.0
GOAL_BYTES = 300_000
FULL_CANARIES = 1000
QUICK_CANARIES = 50
BACKENDS = ("sqlite", "postgresql")
TAGS = 12
REGRESSED_DAYS = 2  # the newest runs are regressions, as during an incident
REPEAT = 7
FLEET_PAIRS = 50  # the fleet page is also timed with this many pairs (their last day only)
ADMIN = {"RAGCANARY_ADMIN_TOKEN": "bench-admin-token"}  # the environment the daemon reads
PENDING = 10_000  # failure reports waiting for review: the default cap of pending candidates
FIRST_VIEWS = ("run", "diff")  # the pages reading whole reports: also timed on a first view
# The previous release's pages (schema 6, commit 19daaa0) on this machine, 2026-11-28.
PREVIOUS = {
    "diff": {"sqlite": 210.2, "postgresql": 207.4},
    "run": {"sqlite": 86.0, "postgresql": 85.2},
}
SIGNALS = ("thumbs_down", "rephrased", "abandoned", "other")


def suite_file(suite: list[Canary]) -> dict[str, Any]:
    """The suite file of the filled store's canaries, each with a topic tag."""
    return {
        "cases": [
            {
                "id": c.case.id,
                "query": c.case.query,
                "relevant": dict(c.case.relevant or {}),
                "tags": [f"topic-{i % TAGS}"],
            }
            for i, c in enumerate(suite)
        ]
    }


def run_report(
    run_id: str, started_at: datetime, suite: list[Canary], picks: list[int], regressed: bool
) -> RunReport:
    """A run-level report as build_report makes it for one run of the filled suite."""
    cases = [c.entries[p] for c, p in zip(suite, picks, strict=True)]
    metrics = aggregate([(c["metrics"], 1.0) for c in cases if c["metrics"]])
    by_tag: dict[str, list[tuple[dict[str, float], float]]] = {}
    for i, case in enumerate(cases):
        if case["metrics"]:
            by_tag.setdefault(f"topic-{i % TAGS}", []).append((case["metrics"], 1.0))
    shift = -0.2 if regressed else 0.0
    names = sorted(metrics)
    rng = random.Random(run_id)
    failures = [
        {"kind": "drop", "metric": m, "case": None, "message": f"{m} dropped 0.2000 ..."}
        for m in names
        if regressed
    ]
    # As build_report lists them: every (case, metric) worse than the baseline. In the demo's
    # drop-docs incident a regressed case is worse on 17 metrics of 21.
    regressions = [
        {"case": c["id"], "metric": m, "baseline": 1.0, "current": 0.0}
        for c in cases[: len(cases) // 5]
        for m in names[:17]
        if regressed
    ]
    return unmarshal(
        {
            "suite": "core",
            "target": "search",
            "run_id": run_id,
            "started_at": started_at.isoformat(),
            "duration_s": 3.2,
            "outcome": "regression" if regressed else "ok",
            "coverage": sum(c["outcome"] == "ok" for c in cases) / len(cases),
            "metrics": metrics,
            "metrics_by_tag": {tag: aggregate(values) for tag, values in sorted(by_tag.items())},
            "baseline": {
                "run_id": "run-000000",
                "deltas": {m: shift + rng.uniform(-0.01, 0.01) for m in names},
                "p_values": {m: 0.0001 if regressed else rng.random() for m in names},
                "ci": {m: [shift - 0.05, shift + 0.05] for m in names},
                "win_tie_loss": {m: [100, 700, 200] for m in names},
                "rank_overlap": 0.6 if regressed else 0.95,
                "score_drift": 0.01,
                "score_drifted_ratio": 0.02,
                "score_shift": -0.001,
                "top_score_delta": -0.002,
                "embedding_drift": None,
                "embedding_changed_ratio": None,
                "embedding_dimensions": None,
            },
            "failures": failures,
            "regressions": regressions,
            "counts": {"cases": len(cases), "answered": len(cases), "outcomes": {"ok": len(cases)}},
            "cases": cases,
        }
    )


def fill(url: str, suite: list[Canary], now: datetime, seed: int = 1) -> bulk.Numbering:
    """30 days of runs every EVERY_S up to ``now``, the first pinned; the numbering of the
    runs stored, to number more after them."""
    rng = random.Random(seed)
    steps = DAYS * 86_400 // EVERY_S
    regressed_from = steps - REGRESSED_DAYS * 86_400 // EVERY_S
    with bulk.filling(url) as conn:
        numbers = bulk.numbering(conn, "core", [canary.case.id for canary in suite])
        # Run-level reports repeat from run to run (computing 8,640 would take minutes); the
        # answers differ in every run.
        templates = {
            regressed: [
                run_report("t", now, suite, [rng.randrange(VARIANTS) for _ in suite], regressed)
                for _ in range(3)
            ]
            for regressed in (False, True)
        }
        # Each canary's answers as each template's judgement has it (its regressed cases).
        judged = {
            (regressed, n): _judged(template, suite)
            for regressed, made in templates.items()
            for n, template in enumerate(made)
        }
        batch: list[bulk.Numbered] = []
        for step in range(steps):
            started_at = now - timedelta(seconds=EVERY_S * (steps - 1 - step))
            picks = [rng.randrange(VARIANTS) for _ in suite]
            which = (step >= regressed_from, step % 3)
            run = run_head(templates[which[0]][which[1]], f"run-{step:06d}", started_at)
            answers = judged[which]
            answered = [answers[c][pick] for c, pick in enumerate(picks)]
            batch.append(numbers.number(run, answered))
            if len(batch) * len(suite) >= 50_000 or step == steps - 1:
                bulk.write(conn, batch, numbers)
                batch = []
        conn.execute(
            baselines.insert().values(
                suite="core", target="search", run_id="run-000000", set_at=now - timedelta(DAYS)
            )
        )
        conn.commit()
    return numbers


def _judged(template: RunReport, suite: list[Canary]) -> list[list[bulk.Answer]]:
    findings = RunFindings.of_report(template)
    return [
        [
            answer.judged(findings.verdict(canary.case.id, entry["outcome"]))
            for answer, entry in zip(canary.answers, canary.entries, strict=True)
        ]
        for canary in suite
    ]


def add_candidates(url: str, now: datetime, count: int = PENDING, seed: int = 2) -> None:
    """``count`` pending candidates, each with its five last reports kept whole (as the intake
    keeps them), naming the target and the ids the application retrieved."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        reports = rng.randint(1, 40)
        last = now - timedelta(seconds=rng.randrange(7 * 86_400))
        recent = [
            {
                "at": (last - timedelta(minutes=5 * j)).isoformat(),
                "signal": rng.choice(SIGNALS),
                "target": "search",
                "ids": [f"doc-{rng.randrange(50_000)}" for _ in range(5)],
                "note": None,
                "source": f"app-{rng.randrange(20)}",
            }
            for j in range(min(reports, 5))
        ]
        signals = {r["signal"]: 1 for r in recent}
        rows.append(
            {
                "key": f"{i:064x}",
                "query": f"failure report {i}: why does search miss the page about topic {i % 97}",
                "status": "pending",
                "reports": reports,
                "signals": signals,
                "recent": recent,
                "first_at": last - timedelta(days=1),
                "last_at": last,
            }
        )
    engine = make_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(candidates.insert(), rows)
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE")
    engine.dispose()


def add_pairs(
    url: str, suite: list[Canary], now: datetime, count: int, numbers: bulk.Numbering
) -> None:
    """Runs of the last day for ``count`` more targets of the suite, numbered after the
    filled ones: the run-level rows a fleet page reads (stored as runs without cases)."""
    template = run_report("t", now, suite, [0] * len(suite), regressed=False)
    made = [
        run_head(
            template,
            f"extra-{t:03d}-{step:04d}",
            now - timedelta(seconds=EVERY_S * step),
            target=f"extra-{t:03d}",
        )
        for step in reversed(range(86_400 // EVERY_S))  # in time order, as bulk numbers them
        for t in range(1, count)
    ]
    with bulk.filling(url) as conn:
        bulk.write(conn, [numbers.number(run, []) for run in made], numbers)


def write_config(
    directory: Path,
    url: str,
    suite: list[Canary],
    targets: list[str] | None = None,
    search_url: str = "http://127.0.0.1:9/search",
) -> Path:
    (directory / "core.json").write_text(json.dumps(suite_file(suite)), encoding="utf-8")
    config = {
        "storage": url,
        "targets": {
            name: {"url": search_url, "body": {"q": "{query}", "k": "{k}"}, "retries": 0}
            for name in targets or ["search"]
        },
        "suites": {
            "core": {
                "cases": "core.json",
                "targets": targets or ["search"],
                "every": f"{EVERY_S}s",
                "k": list(KS),
                "depth": DEPTH,
                "thresholds": {"hit_rate": {5: 0.5}},
            }
        },
    }
    path = directory / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    return path


def pages(suite: list[Canary], steps: int) -> dict[str, str]:
    """The pages timed, by name: what an on-call engineer opens during the incident."""
    latest = f"run-{steps - 1:06d}"
    middle = suite[len(suite) // 2].case.id
    return {
        "fleet": "/ui/",
        "run": f"/ui/runs/{latest}",
        "run_filtered": f"/ui/runs/{latest}?tag=topic-3&outcome=regressed",
        "run_sorted_last_page": f"/ui/runs/{latest}?sort=rbo&dir=asc&page=5",
        "diff": "/ui/diff?suite=core&target=search",
        "case_7d": f"/ui/case?suite=core&case={middle}&target=search",
        "case_30d": f"/ui/case?suite=core&case={middle}&target=search&since=30d",
        "baselines": "/ui/baselines",
        "stale_labels": "/ui/stale-labels",
        "candidates": "/ui/candidates",
        "candidates_filtered": "/ui/candidates?signal=abandoned&page=20",
    }


class Client:
    """Requests to the app in process, on one event loop: what the server spends on each."""

    def __init__(self, daemon: Daemon) -> None:
        self._runner = asyncio.Runner()
        transport = httpx.ASGITransport(create_app(daemon.service))
        # Signed in with the admin token, which the candidates pages need.
        token = ADMIN["RAGCANARY_ADMIN_TOKEN"]
        self._client = httpx.AsyncClient(
            transport=transport,
            base_url="http://localhost",  # a host the daemon answers (serve/http/hosts.py)
            headers={"authorization": f"Bearer {token}"},
        )

    def get(self, path: str) -> httpx.Response:
        return self._runner.run(self._client.get(path))

    def close(self, opened: list[httpx.AsyncClient] | None = None) -> None:
        """Close the client, and ``opened`` (clients made on this loop by the daemon)."""
        for other in opened or ():
            self._runner.run(other.aclose())
        self._runner.run(self._client.aclose())
        self._runner.close()


def _assets(client: Client, html: str) -> int:
    """Bytes of the scripts and stylesheets a page loads (each fetched from the app)."""
    found = re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', html)
    return sum(len(client.get(path).content) for path in found)


def timed(client: Client, path: str) -> dict[str, Any]:
    """Median, fastest and slowest of REPEAT requests of ``path`` after one; its bytes."""
    response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        client.get(path)
        times.append((time.perf_counter() - started) * 1000)
    return _figures(times, response, client)


def timed_cold(daemon: Daemon, path: str) -> dict[str, Any]:
    """Like ``timed``, each request from a new app: nothing remembered from earlier requests."""
    return _timed_new(daemon, path, lambda: Client(daemon))


def timed_first(daemon: Daemon, client: Client, path: str) -> dict[str, Any]:
    """Like ``timed``, each request after the store forgot the rankings it read (``Store.forget``):
    a run nobody opened yet, opened in a daemon that has served pages before."""

    def forgotten() -> Client:
        daemon.store.forget()
        return client

    return _timed_new(daemon, path, forgotten, close=False)


def _timed_new(
    daemon: Daemon, path: str, client_of: Callable[[], Client], close: bool = True
) -> dict[str, Any]:
    """REPEAT requests of ``path``, each from the client ``client_of`` gives then (closed
    after it when ``close``)."""
    times = []
    for _ in range(REPEAT):
        client = client_of()
        try:
            started = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
            figures = _figures(times, response, client)
        finally:
            if close:
                client.close()
    return figures


def _figures(times: list[float], response: httpx.Response, client: Client) -> dict[str, Any]:
    return {
        "ms": statistics.median(times),
        "min_ms": min(times),
        "max_ms": max(times),
        "bytes": len(response.content),
        "with_assets": len(response.content) + _assets(client, response.text),
    }


def measure(backend: str, count: int) -> dict[str, Any]:
    """Fill a store on ``backend`` and time every page ``REPEAT`` times after a warm-up."""
    suite = canaries(count)
    gc.freeze()
    now = datetime.now(UTC).replace(microsecond=0)
    steps = DAYS * 86_400 // EVERY_S
    with (
        database(backend) as url,
        tempfile.TemporaryDirectory() as directory,
        RetrieverProcess(0.0) as retriever,  # answers at once: the page's own time is timed
    ):
        with Store.from_url(url) as store:
            store.migrate()
        print(f"  {backend}: filling {count} canaries x {DAYS} days", flush=True)
        started = time.perf_counter()
        numbers = fill(url, suite, now)
        fill_s = time.perf_counter() - started
        add_candidates(url, now)
        print(f"  {backend}: filled in {fill_s:.0f} s", flush=True)
        config = write_config(Path(directory), url, suite, search_url=retriever.url)
        loaded = load_config(config, ADMIN)
        opened: list[httpx.AsyncClient] = []  # the daemon's clients of the target, closed below

        def clients(target: TargetConfig) -> httpx.AsyncClient:
            opened.append(make_client(target))
            return opened[-1]

        daemon = Daemon(config, ADMIN, loaded, client_factory=clients)
        client = Client(daemon)
        results: dict[str, Any] = {}
        try:
            results["fleet_cold"] = timed_cold(daemon, "/ui/")
            shown = pages(suite, steps)
            for name, path in shown.items():
                results[name] = timed(client, path)
                if name in FIRST_VIEWS:
                    results[f"{name}_first"] = timed_first(daemon, client, path)
                print(
                    f"  {backend}: {name:<22} {results[name]['ms']:7.1f} ms "
                    f"{results[name]['bytes'] / 1000:7.1f} kB",
                    flush=True,
                )
        finally:
            client.close(opened)
            daemon.store.close()
        print(f"  {backend}: adding the last day of {FLEET_PAIRS - 1} more pairs", flush=True)
        add_pairs(url, suite, now, FLEET_PAIRS, numbers)
        names = ["search"] + [f"extra-{t:03d}" for t in range(1, FLEET_PAIRS)]
        config = write_config(Path(directory), url, suite, names)
        daemon = Daemon(config, {}, load_config(config, {}))
        client = Client(daemon)
        try:
            results["fleet_many"] = timed(client, "/ui/")
            results["fleet_many_cold"] = timed_cold(daemon, "/ui/")
        finally:
            client.close()
            daemon.store.close()
        for name in ("fleet_many", "fleet_many_cold"):
            print(f"  {backend}: {name:<22} {results[name]['ms']:7.1f} ms", flush=True)
    gc.unfreeze()
    return {"fill_s": fill_s, "pages": results}


def run(
    quick: bool, canaries_count: int | None = None, backends: tuple[str, ...] = BACKENDS
) -> dict[str, Any]:
    """Fill and time each backend at the full (or quick) scale; JSON-serialisable figures."""
    count = canaries_count or (QUICK_CANARIES if quick else FULL_CANARIES)
    measured: dict[str, Any] = {}
    for backend in backends:
        reason = postgres_unreachable() if backend == "postgresql" else None
        if reason and os.environ.get("RAGCANARY_REQUIRE_POSTGRES") == "1":
            raise RuntimeError(f"{reason} (RAGCANARY_REQUIRE_POSTGRES=1 forbids skipping)")
        measured[backend] = {"skipped": reason} if reason else measure(backend, count)
    return {
        "canaries": count,
        "runs": DAYS * 86_400 // EVERY_S,
        "quick": quick,
        "goal_ms": GOAL_MS,
        "goal_bytes": GOAL_BYTES,
        "backends": measured,
    }


_PAGES = {
    "fleet_cold": "Fleet (`/ui/`), first view (nothing remembered)",
    "fleet": "Fleet (`/ui/`)",
    "run_first": "Run, the newest regression, first view (nothing remembered)",
    "run": "Run, the newest regression, regressions first",
    "run_filtered": "Run, filtered by tag and outcome",
    "run_sorted_last_page": "Run, sorted by RBO, last page",
    "diff_first": "Diff, baseline to newest, first view (nothing remembered)",
    "diff": "Diff, baseline to newest (every changed case)",
    "case_7d": "Case, 7 days (2,016 runs)",
    "case_30d": "Case, 30 days (8,640 runs)",
    "baselines": "Baselines",
    "stale_labels": "Stale labels",
    "candidates": f"Candidates, first page of {PENDING:,} pending, 20 asked live",
    "candidates_filtered": "Candidates, one signal, page 20, 20 asked live",
    "fleet_many": f"Fleet of {FLEET_PAIRS} pairs (the others with a day of runs)",
    "fleet_many_cold": f"Fleet of {FLEET_PAIRS} pairs, first view",
}
_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def render(result: dict[str, Any]) -> str:
    """The section body: what was measured, the one command, the figures, what they mean."""
    measured = {b: m for b, m in result["backends"].items() if "skipped" not in m}
    rows = []
    for name, label in _PAGES.items():
        found = [m["pages"][name] for m in measured.values() if name in m["pages"]]
        if not found:
            continue
        cells = [f"{f['ms']:,.1f} ({f['min_ms']:,.1f} to {f['max_ms']:,.1f})" for f in found]
        size = found[0] if found else None
        rows.append(
            [
                label,
                *cells,
                f"{size['bytes'] / 1000:,.1f}" if size else "",
                f"{size['with_assets'] / 1000:,.1f}" if size else "",
            ]
        )
    # The goal is the issue's scale, one pair of 1,000 canaries; the fleet of many pairs is
    # shown for scale and judged on its own line.
    scale = {b: {n: p for n, p in m["pages"].items() if not n.startswith("fleet_many")}
             for b, m in measured.items()}  # fmt: skip
    slowest = {b: max(p["ms"] for p in pages.values()) for b, pages in scale.items()}
    many = {b: m["pages"].get("fleet_many_cold", {}).get("ms") for b, m in measured.items()}
    largest = max(
        (p["with_assets"] for m in measured.values() for p in m["pages"].values()), default=0
    )
    rows.append(
        [
            f"slowest page of one pair, goal ≤ {GOAL_MS:g} ms",
            *(verdict(slowest[b], GOAL_MS) for b in measured),
            "",
            verdict(largest, GOAL_BYTES),
        ]
    )
    headers = [
        "page",
        *(f"{_NAMES[b]} ms: median (range)" for b in measured),
        "HTML kB",
        "with scripts and styles kB",
    ]
    what = (
        f"Every page of the web UI over a store that {result['canaries']:,} canaries filled every "
        f"{EVERY_S // 60} minutes for {DAYS} days ({result['runs']:,} runs; the store and its "
        "bulk filling are the history benchmark's, each run with a whole run-level report: "
        f"metrics per tag, the baseline comparison, and for the last {REGRESSED_DAYS} days a "
        "regression's failures and every regressed case and metric, as `to_report` lists them "
        "(a fifth of the canaries on 17 metrics each: 370 kB of JSON per run). A daemon is built "
        "on it (not started) and each page requested through the app in process (httpx's ASGI "
        "transport): routing, storage, computing and rendering, no network. Median of "
        f"{REPEAT} requests after one, and the bytes sent: the HTML, and with every script and "
        "stylesheet it loads (uncompressed). The fleet is also timed on its first view (a new "
        "app each time: nothing remembered), the run and diff pages on theirs (each request "
        "after the store forgot the rankings it had read, `Store.forget`), and the fleet with "
        f"{FLEET_PAIRS} pairs, the others holding a day of runs (what it reads of each)."
    )
    said = []
    for backend in measured:
        said.append(
            f"On {_NAMES[backend]} the slowest page of the pair takes {slowest[backend]:,.1f} ms "
            f"({verdict(slowest[backend], GOAL_MS)} the goal of {GOAL_MS:g} ms); a first view "
            f"of a fleet of {FLEET_PAIRS} pairs takes {many[backend] or 0:,.1f} ms."
        )
    for backend, m in result["backends"].items():
        if "skipped" in m:
            said.append(f"{_NAMES[backend]} was not measured: {m['skipped']}.")
    said.append(
        f"The largest page sends {largest / 1000:,.1f} kB with its assets "
        f"({verdict(largest, GOAL_BYTES)} the limit of {GOAL_BYTES / 1000:g} kB). Pages stay "
        "small by design: the run page shows 200 cases a page (filters and sorting run on the "
        "server over all of them), the diff 25 changed cases a page, the case chart at most "
        "800 points, each the worst run of its stretch of time, so a one-run drop still shows. "
        "No page reads a day of run-level reports: the fleet reads the day's run ids and "
        "outcomes, draws every run while they fit the sparkline's 120 pixels, else the worst "
        "run of each slot of time that fits (a quarter of an hour for runs every 5 minutes), "
        "and reads each drawn run's metrics "
        "object once (a run-level part, which runs with the same metrics share, as they share "
        "the deltas of their baseline comparison), remembering it and the newest run's summary "
        "from view to view, since a stored run never changes; a first view reads them all, "
        "later views only the runs that are new. The run and diff pages read whole reports "
        "(a run's answers and every ranking they name); the diff reads two and compares every "
        "case, which makes it the slowest page of a pair. A first view decompresses and "
        "decodes every ranking; the store then remembers the case entry made of each "
        "(`store.remembered`, up to 2,500 rankings: the newest run and its baseline here), "
        "which later views, and later runs of the pair answering as this one did, read "
        "again. The case page's 30-day window reads 8,640 answers and the rankings they name. "
        "The previous release (schema 6, commit 19daaa0), measured with its own version of "
        "this benchmark on the same machine on 2026-11-28, already missed the goal: its diff "
        f"took {PREVIOUS['diff']['sqlite']} ms on SQLite and "
        f"{PREVIOUS['diff']['postgresql']} ms on PostgreSQL, its run page (newest "
        f"regression) {PREVIOUS['run']['sqlite']} and {PREVIOUS['run']['postgresql']} ms, "
        "the 30-day case page 87.3 and 86.1 ms, a first view of a fleet of 50 pairs 219.2 "
        "and 318.3 ms; it remembered nothing, so its every view was a first view. Its case "
        "entries held 21 metrics each; they now hold 26 (bpref and judged@k joined them), a "
        "quarter more to decode."
    )
    for backend, m in measured.items():
        for page in FIRST_VIEWS:
            first = m["pages"].get(f"{page}_first", {}).get("ms")
            before = PREVIOUS[page][backend]
            if first is not None and not result["quick"]:  # the previous: full scale
                said.append(
                    f"On {_NAMES[backend]} a first view of the {page} page takes {first:,.1f} "
                    f"ms ({'faster than' if first <= before else '**slower** than'} the "
                    f"previous release's {before} ms)."
                )
    if result["quick"]:
        said.append(f"Quick scale: {result['canaries']} canaries instead of {FULL_CANARIES:,}.")
    return section(what, "ui", table(headers, rows), " ".join(said))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CANARIES} canaries")
    parser.add_argument("--canaries", type=int, help=f"default {FULL_CANARIES:,}")
    parser.add_argument("--backend", choices=BACKENDS, action="append", help="default: both")
    args = parser.parse_args()
    print(render(run(args.quick, args.canaries, tuple(args.backend or BACKENDS))))


if __name__ == "__main__":
    main()
