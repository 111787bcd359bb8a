"""Benchmark 4: storage_history.py at a scale that fits the budget, its output parsed into rows."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).with_name("storage_history.py")
_TIMED = re.compile(r"^(?P<label>\S.*?)\s+median\s+(?P<ms>[\d.]+) ms\s*(?P<rows>\d+ rows)?\s*$")
_PRUNE = re.compile(r"^(?P<label>prune.*?)\s+(?P<s>[\d.]+) s\s+(?P<runs>\d+) runs\s*$")


@dataclass(frozen=True)
class StorageTiming:
    """One operation of storage_history.py: median milliseconds, and rows when it returns rows."""

    operation: str
    ms: float
    rows: str


@dataclass(frozen=True)
class StorageResult:
    """storage_history.py's scale line, file size and timings, as it printed them."""

    command: str
    scale: str
    database: str
    plan: list[str]
    timings: list[StorageTiming]
    wall_s: float


def bench_storage(canaries: int, days: int) -> StorageResult:
    """Run storage_history.py with ``--canaries`` and ``--days`` and parse what it prints."""
    args = ["--canaries", str(canaries), "--days", str(days)]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"storage_history.py failed:\n{done.stderr[-2000:]}")
    scale, database, plan, timings = "", "", [], []
    for line in done.stdout.splitlines():
        if line.startswith("scale:"):
            scale = line.removeprefix("scale:").strip()
        elif line.startswith("database file:"):
            database = line.removeprefix("database file:").strip()
        elif line.strip().startswith("plan:"):
            plan.append(line.strip().removeprefix("plan:").strip())
        elif match := _TIMED.match(line.strip()):
            rows = match["rows"] or ""
            timings.append(StorageTiming(match["label"].strip(), float(match["ms"]), rows))
        elif match := _PRUNE.match(line.strip()):
            ms = float(match["s"]) * 1000
            timings.append(StorageTiming(match["label"].strip(), ms, f"{match['runs']} runs"))
    if not timings:
        raise RuntimeError(f"no timings in storage_history.py's output:\n{done.stdout}")
    for timing in timings:
        print(f"  {timing.operation:<48} {timing.ms:9.1f} ms  {timing.rows}")
    command = f".venv/bin/python bench/storage_history.py {' '.join(args)}"
    return StorageResult(command, scale, database, plan, timings, wall)
