"""docs/performance.md from bench/performance.md.in and the measured numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from bench_core import PART_OF, CoreRates, EvaluationTiming
from bench_runner import CycleTiming
from bench_storage import StorageResult
from scales import Scale

TEMPLATE = Path(__file__).with_name("performance.md.in")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; every column but the first is right-aligned (they hold numbers)."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("| --- |" + " ---: |" * (len(headers) - 1))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(
    scale: Scale,
    results: Mapping[str, Any],
    environment: Mapping[str, str],
) -> str:
    """The whole document; ``results`` holds every benchmark's output, keyed as run.py keys it."""
    runner: list[CycleTiming] = results["runner"]
    ceiling: list[CycleTiming] = results["ceiling"]
    evaluation: list[EvaluationTiming] = results["evaluation"]
    core: CoreRates = results["core"]
    storage: StorageResult = results["storage"]
    fields = {
        **environment,
        "scale": scale.name,
        "queries": str(scale.queries),
        "delay_ms": f"{scale.delay_s * 1000:g}",
        "repeat": str(scale.runner_repeat),
        "runner_table": _runner_table(runner),
        "ceiling_table": _ceiling_table(ceiling),
        "runner_meaning": _runner_meaning(runner, ceiling, any(results["sniffio"].values())),
        "evaluation_table": _evaluation_table(evaluation),
        "parts_table": _parts_table(evaluation),
        "evaluation_meaning": _evaluation_meaning(evaluation),
        "core_round": f"{scale.core_seconds / 3:.1f}",
        "core_table": _core_table(core),
        "core_meaning": _core_meaning(core, evaluation),
        "storage_scale": storage.scale,
        "storage_size": storage.database or "(not reported)",
        "storage_command": storage.command,
        "storage_table": _storage_table(storage),
        "storage_plan": "; ".join(f"`{step}`" for step in storage.plan) or "(not reported)",
        "storage_meaning": _storage_meaning(storage),
        "notes": _notes(results["sniffio"], results["sniffio_us"]),
        "storage_factor": f"{200 / scale.canaries:g}",
    }
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(fields)


def _runner_table(timings: list[CycleTiming]) -> str:
    rows = [
        [
            str(t.concurrency),
            f"{t.rate_limit:g}/s" if t.rate_limit else "none",
            f"{t.ideal_s:.3f}",
            f"{t.median_s:.3f}",
            f"{t.best_s:.3f} to {t.worst_s:.3f}",
            f"{t.overhead_s * 1000 / t.queries:+.1f}",
            f"{t.efficiency:.0%}",
        ]
        for t in timings
    ]
    headers = [
        "concurrency C",
        "rate limit",
        "ideal s",
        "measured s (median)",
        "range s",
        "extra ms per query",
        "ideal / measured",
    ]
    return table(headers, rows)


def _ceiling_table(timings: list[CycleTiming]) -> str:
    rows = [
        [
            str(t.concurrency),
            f"{t.median_s:.3f}",
            f"{t.queries / t.median_s:,.0f}",
            f"{t.median_s * 1000 / t.queries:.2f}",
        ]
        for t in timings
    ]
    return table(["concurrency C", "cycle s", "queries per s", "ms per query"], rows)


def _runner_meaning(
    timings: list[CycleTiming], ceiling: list[CycleTiming], sniffio_missing: bool
) -> str:
    free = [t for t in timings if t.rate_limit is None]
    limited = [t for t in timings if t.rate_limit is not None]
    delay = free[0].delay_s
    close = [str(t.concurrency) for t in free if t.efficiency >= 0.8]
    widest = max(free, key=lambda t: t.concurrency)
    fastest = min(free, key=lambda t: t.median_s)
    best = min(ceiling, key=lambda t: t.median_s)
    best_rate = best.queries / best.median_s
    parts = [
        f"With C = {', '.join(close) or 'none'} a cycle stays within 20 % of the ideal; the "
        f"shortest cycle came with C = {fastest.concurrency} ({fastest.median_s:.2f} s)."
    ]
    if widest.efficiency < 0.8:
        parts.append(
            f"At C = {widest.concurrency} the cycle takes {widest.median_s:.2f} s against an "
            f"ideal of {widest.ideal_s:.2f} s: runner and retriever together complete at most "
            f"about {best_rate:,.0f} queries/s on these CPUs (the L = 0 table), so with "
            f"L = {delay:g} s concurrency above about {math.ceil(best_rate * delay)} cannot "
            "shorten the cycle."
        )
    widest_ceiling = max(ceiling, key=lambda t: t.concurrency)
    if widest_ceiling.median_s > 1.3 * best.median_s:
        parts.append(
            "More concurrency also costs more CPU per query: "
            f"{best.median_s * 1000 / best.queries:.1f} ms per query at C = {best.concurrency}, "
            f"{widest_ceiling.median_s * 1000 / widest_ceiling.queries:.1f} ms at "
            f"C = {widest_ceiling.concurrency}. A profile shows httpcore's connection pool "
            "rescanning every connection for each queued request "
            "(`_assign_requests_to_connections`, encode/httpcore PR #1035)"
            + (" and, see the notes, failed imports of sniffio." if sniffio_missing else ".")
        )
    parts.append(
        "A canary suite of a few hundred queries every few minutes is far from these limits; "
        "they matter for retrievers that answer within a few milliseconds or suites of "
        f"thousands of queries, and for those C = {best.concurrency}, the fastest in the "
        "L = 0 table, is the one to start from."
    )
    for t in limited:
        floor = t.queries / (t.rate_limit or 1)
        verdict = "holds" if t.median_s >= floor - 0.01 else "is exceeded"
        parts.append(
            f"With rate_limit {t.rate_limit:g}/s and C = {t.concurrency} a cycle takes "
            f"{t.median_s:.3f} s (N / rate = {floor:.2f} s): the limit {verdict}, at a cost "
            f"of {t.overhead_s * 1000:.0f} ms beyond the ideal."
        )
    return " ".join(parts)


def _evaluation_table(timings: list[EvaluationTiming]) -> str:
    rows = [
        [
            f"{t.cases:,}",
            str(t.repeat),
            f"{t.total_s * 1000:,.1f}",
            f"{t.per_case_ms:.3f}",
        ]
        for t in timings
    ]
    return table(["cases", "repeats", "ms per evaluation", "ms per case"], rows)


def _parts_table(timings: list[EvaluationTiming]) -> str:
    names = list(timings[0].parts)
    rows = [[name] + [f"{t.parts[name]:.3f}" for t in timings] for name in names]
    return table(["step", *(f"{t.cases:,} cases" for t in timings)], rows)


def _share(timing: EvaluationTiming, prefix: str) -> float:
    """The share of ``prefix``'s step in all steps, compare_scores counted by its two parts."""
    part = next(v for k, v in timing.parts.items() if k.removeprefix(PART_OF).startswith(prefix))
    return part / sum(v for k, v in timing.parts.items() if not k.startswith("compare_scores"))


def _evaluation_meaning(timings: list[EvaluationTiming]) -> str:
    largest = timings[-1]
    at_1000 = next((t for t in timings if t.cases == 1000), largest)
    boot, perm = _share(at_1000, "bootstrap_ci"), _share(at_1000, "permutation_test")
    sizes = ", ".join(f"{t.total_s:.2f} s for {t.cases:,}" for t in timings)
    per_case = sorted(t.per_case_ms for t in timings)
    parts = [
        f"Cost grows with the suite ({sizes} cases), between {per_case[0]:.1f} and "
        f"{per_case[-1]:.1f} ms per case.",
        f"At {at_1000.cases:,} cases the bootstrap CI takes {boot:.0%} of the time and the "
        f"permutation test {perm:.0%}; scoring, drift and the rest take the remainder.",
    ]
    if boot + perm > 0.5:
        parts.append(
            "Both statistics run 10,000 rounds for each of the 21 metrics separately, drawing "
            "a rounds x n random matrix in blocks; the bootstrap then gathers weighted[picks] "
            "and w[picks] (two fancy-indexed copies of that size per metric), although its "
            "picks and their weight sums are the same for every metric, since the seed and n "
            "are. The permutation test is cheaper because it drops cases whose delta is 0."
        )
    if at_1000.total_s > 1.0 and boot + perm > 0.5:
        parts.append(
            f"{at_1000.total_s:.1f} s per run is harmless on a 5-minute schedule and in a CI "
            "gate, but it is CPU the daemon's event loop spends per run and it grows with the "
            "suite. Drawing the resampling once per run (a rounds x n matrix of pick counts, "
            "multiplied by all 21 metrics' weighted deltas in one matrix product), and "
            "likewise one sign matrix for the permutation test, would remove most of it."
        )
    return " ".join(parts)


def _core_table(core: CoreRates) -> str:
    rows = [
        [
            "`case_metrics` (depth 10, k = [1, 3, 5, 10])",
            f"{core.case_metrics:,.0f}",
            f"{1e6 / core.case_metrics:.1f}",
        ],
        ["`rbo` (depth 10, p = 0.9)", f"{core.rbo:,.0f}", f"{1e6 / core.rbo:.1f}"],
    ]
    return table(["function", "calls per s", "µs per call"], rows)


def _core_meaning(core: CoreRates, evaluation: list[EvaluationTiming]) -> str:
    largest = evaluation[-1]
    metric_s = 2 * largest.cases / core.case_metrics
    return (
        f"Scoring both runs of a {largest.cases:,}-case suite costs about {metric_s:.2f} s of "
        f"case_metrics and {largest.cases / core.rbo:.3f} s of RBO: the pure-Python measures "
        "are not where evaluate spends its time (section 2). They are exact and simple, and "
        "nothing here asks for them to be vectorised."
    )


def _storage_table(storage: StorageResult) -> str:
    rows = [[t.operation, f"{t.ms:,.1f}", t.rows] for t in storage.timings]
    return table(["operation", "ms (median)", "returns"], rows)


def _storage_meaning(storage: StorageResult) -> str:
    by_name = {t.operation: t for t in storage.timings}
    history = by_name.get("case_history(since=30 days)")
    sql = next((t for t in storage.timings if t.operation.startswith("the SQL alone")), None)
    if history is None:
        return "The history query was not measured."
    parts = [f"One canary's 30-day history ({history.rows}) takes {history.ms:.0f} ms on SQLite."]
    if sql is not None and history.ms > 0:
        parts.append(
            f"The SQL itself takes {sql.ms:.0f} ms ({sql.ms / history.ms:.0%}); the rest is "
            "decoding each row's JSON columns (ids, scores, metrics, comparison) into Python "
            "objects."
        )
    if any(step.startswith("SEARCH results USING INDEX") for step in storage.plan):
        parts.append(
            "The query reaches the results through an index on the case, so its cost follows "
            "the canary's own rows rather than the size of the table; only those rows are "
            "sorted by time."
        )
    if history.ms < 1000:
        parts.append(
            "That is fast enough for `ragcanary history` and the history API. If a dashboard "
            "ever polls it for many canaries, a narrower query (metrics only, no ids or "
            "comparison) would cut the decoding, which is most of the time."
        )
    return " ".join(parts)


def _notes(attempts: Mapping[int, float], failed_us: float) -> str:
    """A note on httpcore's failed sniffio imports, when there are any."""
    if not any(attempts.values()):
        return ""
    per_c = ", ".join(f"{n:.1f} at C = {c}" for c, n in sorted(attempts.items()))
    worst = max(attempts.values())
    return (
        "\n## Notes\n\n"
        "- `sniffio` is not installed in this environment (anyio 4.11+ no longer depends on "
        "it), and httpcore 1.0.x then tries `import sniffio` on every lock, event and "
        "semaphore setup. Python does not cache a failed import, so each try searches the "
        f"whole `sys.path`: measured {per_c} failed imports per query, {failed_us:.0f} µs "
        f"each, so up to {worst * failed_us / 1000:.2f} ms of CPU per query, spent in the "
        "daemon's event loop (encode/httpcore discussion #1102, PR #1103). Declaring "
        "`sniffio` as a dependency of ragcanary removes it.\n"
    )
