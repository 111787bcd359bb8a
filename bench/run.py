"""Run benchmarks, store their results with the machine they ran on, regenerate the docs page.

    .venv/bin/python bench/run.py                  # every benchmark, full scale (`make bench`)
    .venv/bin/python bench/run.py cycle scrape     # only these; the others' stored results stay
    .venv/bin/python bench/run.py cycle --quick    # a smaller scale, while developing
    .venv/bin/python bench/run.py --render         # only regenerate docs/performance.md

A benchmark is a module ``bench/<name>.py`` listed in ``BENCHMARKS`` and exposing::

    TITLE: str                                      # its section heading
    def run(quick: bool) -> dict[str, Any]: ...     # JSON-serialisable figures
    def render(result: dict[str, Any]) -> str: ...  # its section body (see render.section)

Each run is stored in ``bench/results/<name>.json`` (committed): the figures, the scale, and
the machine (date, Python, CPUs and their model, load average before and after). The docs
page is then rebuilt from every stored result, in the order of ``BENCHMARKS``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from render import document

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
DOCS = BENCH.parent / "docs" / "performance.md"
# The order of the sections in docs/performance.md.
BENCHMARKS = (
    "cycle",
    "cpu",
    "memory",
    "scrape",
    "scale",
    "evaluation",
    "metrics",
    "history",
    "storage",
    "ui",
    "detection",
    "intake",
    "power",
)


def load(name: str) -> ModuleType | None:
    """Benchmark ``name``'s module, or None while it is not written yet.

    Imported lazily and one by one, so a benchmark that is missing does not stop the others;
    an import error inside an existing module is a bug and is raised.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def cpu_model() -> str:
    """The CPU model as /proc/cpuinfo names it, else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure(name: str, module: ModuleType, quick: bool) -> dict[str, Any]:
    """Run one benchmark and wrap its figures with the machine and load it ran under."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result = module.run(quick)
    took = time.perf_counter() - started
    return {
        "benchmark": name,
        "quick": quick,
        "took_s": round(took, 1),
        "machine": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "system": f"{platform.system()} {platform.machine()}",
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
        },
        "result": result,
    }


def regenerate(output: Path) -> list[str]:
    """Rewrite ``output`` from every stored result; the benchmarks it left out, and why."""
    sections, missing = [], []
    for name in BENCHMARKS:
        path = RESULTS / f"{name}.json"
        module = load(name)
        if not path.exists() or module is None:
            missing.append(f"{name} ({'no stored result' if module else 'no module'})")
            continue
        stored = json.loads(path.read_text(encoding="utf-8"))
        sections.append((module.TITLE, stored, module.render(stored["result"])))
    output.write_text(document(sections), encoding="utf-8")
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="a smaller scale, for development")
    parser.add_argument("--render", action="store_true", help="only regenerate the docs page")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(
            f"no benchmark named {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}"
        )
    if not args.render:
        RESULTS.mkdir(exist_ok=True)
        for name in args.names or BENCHMARKS:
            module = load(name)
            if module is None:
                print(f"{name}: bench/{name}.py does not exist yet, skipped", file=sys.stderr)
                continue
            print(f"== {name}: {module.TITLE}", flush=True)
            stored = measure(name, module, args.quick)
            path = RESULTS / f"{name}.json"
            path.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
            print(module.render(stored["result"]))
            where = path.relative_to(BENCH.parent)
            print(f"== {name} took {stored['took_s']:.0f} s; stored in {where}")
    missing = regenerate(DOCS)
    print(
        f"wrote {DOCS.relative_to(BENCH.parent)}"
        + (f"; without {', '.join(missing)}" if missing else "")
    )


if __name__ == "__main__":
    main()
