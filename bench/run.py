"""Run every benchmark, print the results and rewrite docs/performance.md from its template.

.venv/bin/python bench/run.py            # full scale, about 3 minutes on 2 cores
.venv/bin/python bench/run.py --quick    # smaller scale, under a minute
.venv/bin/python bench/run.py --only evaluation --no-write
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from bench_core import bench_core, bench_evaluation
from bench_runner import bench_concurrency, failed_import_us, imports_per_query
from bench_storage import bench_storage
from render import render
from scales import FULL, QUICK

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ("runner", "evaluation", "core", "storage")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run, under a minute")
    parser.add_argument("--only", choices=BENCHMARKS, help="run one benchmark (implies --no-write)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    wanted = [args.only] if args.only else list(BENCHMARKS)
    load_before = os.getloadavg()
    started = time.perf_counter()
    results: dict[str, object] = {}

    if "runner" in wanted:
        print(f"1. runner: {scale.queries} queries, retriever latency {scale.delay_s:g} s")
        results["runner"] = bench_concurrency(
            scale.queries,
            scale.delay_s,
            scale.concurrencies,
            scale.rate_limited,
            scale.rate,
            scale.runner_repeat,
        )
        print("   the same against a retriever that answers at once (delay 0)")
        results["ceiling"] = bench_concurrency(
            scale.queries, 0.0, scale.ceiling, [], scale.rate, scale.runner_repeat
        )
        widest = max(scale.concurrencies)
        results["sniffio"] = {
            c: imports_per_query("sniffio", scale.queries, c) for c in (1, widest)
        }
        results["sniffio_us"] = failed_import_us("sniffio")
    if "evaluation" in wanted:
        print("2. evaluate(): scoring, drift and verdict against a baseline")
        results["evaluation"] = bench_evaluation(scale.sizes, scale.size_repeats)
    if "core" in wanted:
        print("3. metrics core")
        results["core"] = bench_core(scale.core_seconds)
    if "storage" in wanted:
        print(f"4. storage: {scale.canaries} canaries x {scale.days} days, every 5 minutes")
        results["storage"] = bench_storage(scale.canaries, scale.days)

    took = time.perf_counter() - started
    print(f"all benchmarks took {took:.0f} s")
    if args.only or args.no_write:
        return
    text = render(
        scale=scale,
        results=results,
        environment={
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "cpus": str(os.cpu_count()),
            "machine": f"{platform.system()} {platform.machine()}",
            "load": f"{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after",
            "took": f"{took:.0f} s",
            "command": f".venv/bin/python bench/run.py{' --quick' if args.quick else ''}",
        },
    )
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
