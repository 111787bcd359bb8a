"""Benchmark: one canary's history over 30 days in a SQLite store filled like a busy daemon's.

The target is 1,000 canaries every 5 minutes for 30 days (8.6M result rows). That takes too
long to fill here, so by default it stores 200 canaries x 30 days x every 5 minutes (8,640 runs,
1.73M result rows); one canary's history has the same 8,640 points either way, only the
tables around it are smaller. Not run by the tests:

    .venv/bin/python bench/storage_history.py [--canaries 200] [--days 30] [--url URL]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy

from ragcanary.schema import case_row, results, run_row, runs
from ragcanary.storage import Store, make_engine

KS = (1, 3, 5, 10)
METRICS = [f"{m}@{k}" for m in ("hit_rate", "precision", "recall", "ndcg", "map") for k in KS]


def make_report(
    run_id: str, started_at: datetime, canaries: int, rng: random.Random
) -> dict[str, Any]:
    """A report shaped like to_report's: depth 10, 20 metrics per case, a baseline comparison."""
    cases = []
    for c in range(canaries):
        ids = [f"doc-{rng.randrange(5000):05d}" for _ in range(10)]
        cases.append(
            {
                "id": f"canary-{c:04d}",
                "query": f"how do I configure feature number {c} of the product?",
                "kind": "labelled",
                "outcome": "ok",
                "ids": ids,
                "scores": sorted((round(rng.random(), 6) for _ in ids), reverse=True),
                "latency_s": round(rng.uniform(0.01, 0.2), 4),
                "error": None,
                "metrics": {m: round(rng.random(), 6) for m in METRICS} | {"rr": 1.0},
                "vs_baseline": {
                    "rbo": 0.93,
                    "jaccard": 0.8,
                    "entered": ids[8:],
                    "left": ["doc-00001"],
                    "top_score_delta": -0.01,
                },
            }
        )
    return {
        "suite": "core",
        "target": "search",
        "run_id": run_id,
        "started_at": started_at.isoformat(),
        "duration_s": 3.2,
        "outcome": "ok",
        "coverage": 1.0,
        "metrics": dict.fromkeys(METRICS, 0.8) | {"mrr": 0.7},
        "cases": cases,
    }


def fill(url: str, canaries: int, days: int, every_s: int, now: datetime) -> int:
    """Insert the runs in large transactions (the daemon saves one per transaction).

    Every run repeats one template report's cases, serialised once: the rows, their sizes
    and the indexes' work are those of real runs, and filling stays fast enough to run often.
    """
    engine = make_engine(url)
    steps = days * 86_400 // every_s
    template = make_report("template", now, canaries, random.Random(7))
    columns = [c.name for c in results.columns]
    cases = [_serialised(case_row("template", i, c)) for i, c in enumerate(template["cases"])]
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    insert = (
        f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    )
    batch_runs: list[dict[str, Any]] = []
    batch_results: list[tuple[Any, ...]] = []
    for step in range(steps):
        started_at = now - timedelta(seconds=every_s * (steps - step))
        row = run_row(
            {**template, "run_id": f"run-{step:06d}", "started_at": started_at.isoformat()}
        )
        batch_runs.append(row)
        batch_results.extend(
            tuple({**c, "run_id": row["run_id"]}[k] for k in columns) for c in cases
        )
        if len(batch_runs) == 100 or step == steps - 1:
            with engine.begin() as conn:
                conn.execute(runs.insert(), batch_runs)
                conn.exec_driver_sql(insert, batch_results)
            batch_runs, batch_results = [], []
            print(f"\r  filled {step + 1}/{steps} runs", end="", file=sys.stderr)
    print(file=sys.stderr)
    engine.dispose()
    return steps


def _serialised(row: dict[str, Any]) -> dict[str, Any]:
    json_columns = {c.name for c in results.columns if isinstance(c.type, sqlalchemy.JSON)}
    return {
        key: json.dumps(value, separators=(",", ":"))
        if key in json_columns and value is not None
        else value
        for key, value in row.items()
    }


def explain_history(url: str, case: str, since: datetime) -> None:
    """Print SQLite's plan for case_history's query and the time of the SQL alone."""
    engine = make_engine(url)
    sql = (
        "SELECT results.*, runs.started_at, runs.target, runs.outcome FROM results "
        "JOIN runs ON results.run_id = runs.run_id WHERE results.case_id = ? AND runs.suite = ? "
        "AND runs.started_at >= ? ORDER BY runs.started_at, runs.run_id"
    )
    params = (case, "core", since.replace(tzinfo=None).isoformat(sep=" "))
    with engine.connect() as conn:
        for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params):
            print(f"  plan: {row[-1]}")
        timed("  the SQL alone (no JSON decoding)", lambda: conn.exec_driver_sql(sql, params).all())
    engine.dispose()


def timed(label: str, call: Callable[[], Any], repeat: int = 5) -> Any:
    call()  # warm the page cache and the statement cache once
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    size = f"{len(result)} rows" if isinstance(result, list) else ""
    print(f"{label:<48} median {statistics.median(times) * 1000:8.1f} ms  {size}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=200)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--every", type=int, default=300, help="seconds between runs")
    parser.add_argument("--url", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory()
    url = args.url or f"sqlite:///{Path(workdir.name) / 'bench.db'}"
    now = datetime.now(UTC)

    with Store.from_url(url) as store:
        store.migrate()
    start = time.perf_counter()
    steps = fill(url, args.canaries, args.days, args.every, now)
    print(
        f"scale: {args.canaries} canaries x {args.days} days every {args.every}s = {steps:,} runs, "
        f"{steps * args.canaries:,} result rows; filled in {time.perf_counter() - start:.0f}s"
    )
    if url.startswith("sqlite"):
        size = Path(sqlalchemy.make_url(url).database or "").stat().st_size
        print(f"database file: {size / 1e6:,.0f} MB")

    with Store.from_url(url) as store:
        case = f"canary-{args.canaries // 2:04d}"
        timed(
            "case_history(since=30 days)",
            lambda: store.case_history("core", case, since=now - timedelta(days=30)),
        )
        timed(
            "case_history(target, since=7 days)",
            lambda: store.case_history("core", case, "search", now - timedelta(days=7)),
        )
        timed(
            "case_history(since=1 day)",
            lambda: store.case_history("core", case, since=now - timedelta(days=1)),
        )
        if url.startswith("sqlite"):
            explain_history(url, case, now - timedelta(days=30))
        timed("list_runs(suite, target, limit=50)", lambda: store.list_runs("core", "search"))
        timed("list_runs(limit=50)", lambda: store.list_runs())
        timed("latest_run(suite, target)", lambda: store.latest_run("core", "search"))
        timed(
            f"get_report (one run, {args.canaries} cases)", lambda: store.get_report("run-000100")
        )
        rng = random.Random(1)
        fresh = iter(range(10**6))
        timed(
            f"save_run (one run, {args.canaries} cases)",
            lambda: store.save_run(make_report(f"new-{next(fresh)}", now, args.canaries, rng)),
        )
        start = time.perf_counter()
        deleted = store.prune(now, timedelta(days=args.days - 1), timedelta(days=90))
        took = time.perf_counter() - start
        print(f"{'prune (one day of runs)':<48} {took:11.2f} s   {deleted} runs")
    workdir.cleanup()


if __name__ == "__main__":
    main()
