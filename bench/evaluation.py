"""Benchmark: what judging one run costs, evaluate() on suites of 100 to 5,000 cases.

evaluate() scores the run, compares it with the baseline (drift, RBO, score deltas) and
judges it, with a paired permutation test and bootstrap CI of 10,000 rounds per aggregate
metric. It runs on the daemon's event loop once per run, so its cost is CPU the loop spends
per run; the reference is the same run judged without a baseline (scoring and floors only).
"""

from __future__ import annotations

import functools
import random
from datetime import UTC, datetime
from typing import Any

from render import section, table
from timing import median_seconds

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.cases import Case
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import Answer, CaseResult, RunResult
from ragcanary.suites.judge import settings_for

TITLE = "Evaluation cost"
KS = [1, 3, 5, 10]
DEPTH = 10
POOL = 40  # candidate documents per case: rankings overlap the judged ids often, not always
CHANGED = 0.25  # share of cases whose ranking differs from the baseline's
FULL = {100: 7, 1000: 5, 5000: 2}  # cases -> timed repeats
QUICK = {100: 3, 1000: 1}
INTERVAL_S = 300.0  # the default schedule (docs/config.md), every 5 minutes


def build_runs(cases: int, seed: int = 0) -> tuple[RunResult, RunResult]:
    """A baseline run and a current run of ``cases`` labelled cases, ``CHANGED`` of them moved.

    Every case has 3 judged relevant ids (grades 1 or 2) among ``POOL`` candidates and is
    answered with ``DEPTH`` ids and distinct decreasing scores. In the current run a quarter
    of the cases get a different ranking and slightly lower scores, like a small drift.
    """
    rng = random.Random(seed)
    baseline, current = [], []
    for i in range(cases):
        relevant = {f"doc-{i}-{j}": rng.choice((1, 2)) for j in rng.sample(range(POOL), 3)}
        case = Case(f"case-{i:05d}", f"query {i}", relevant, tags=(f"tag-{i % 4}",))
        ids = tuple(f"doc-{i}-{j}" for j in rng.sample(range(POOL), DEPTH))
        scores = tuple(sorted((rng.random() for _ in ids), reverse=True))
        baseline.append(CaseResult(case, Answer(ids, scores, 0.02, "ok")))
        if rng.random() < CHANGED:
            ids = tuple(f"doc-{i}-{j}" for j in rng.sample(range(POOL), DEPTH))
            scores = tuple(max(0.0, s - rng.uniform(0.0, 0.1)) for s in scores)
        current.append(CaseResult(case, Answer(ids, scores, 0.02, "ok")))
    started = datetime(2026, 1, 1, tzinfo=UTC)
    return (
        RunResult("core", "search", "baseline", started, 1.0, tuple(baseline)),
        RunResult("core", "search", "current", started, 1.0, tuple(current)),
    )


def run(quick: bool) -> dict[str, Any]:
    """Median evaluate() time per suite size, with and without a baseline."""
    config = settings_for(SuiteConfig(cases="core.yaml", targets=["search"], k=KS, depth=DEPTH))
    rows = []
    for size, repeat in (QUICK if quick else FULL).items():
        baseline, current = build_runs(size)
        alone = median_seconds(functools.partial(evaluate, current, config), repeat)
        judged = median_seconds(functools.partial(evaluate, current, config, baseline), repeat)
        rows.append({"cases": size, "repeat": repeat, "alone_s": alone, "baseline_s": judged})
        print(f"  {size:>5} cases: {alone * 1000:8.1f} ms alone, {judged * 1000:8.1f} ms judged")
    return {"sizes": rows}


def render(result: dict[str, Any]) -> str:
    rows = result["sizes"]
    figures = table(
        ["cases", "repeats", "no baseline ms", "against a baseline ms", "ms per case", "ratio"],
        [
            [
                f"{r['cases']:,}",
                str(r["repeat"]),
                f"{r['alone_s'] * 1000:,.1f}",
                f"{r['baseline_s'] * 1000:,.1f}",
                f"{r['baseline_s'] * 1000 / r['cases']:.3f}",
                f"{r['baseline_s'] / r['alone_s']:.1f}x",
            ]
            for r in rows
        ],
    )
    largest = rows[-1]
    share = largest["baseline_s"] / INTERVAL_S
    per_case = sorted(r["baseline_s"] * 1000 / r["cases"] for r in rows)
    meaning = (
        f"Judging a run against its baseline costs {largest['baseline_s'] / largest['alone_s']:.1f}"
        f" times scoring it alone at {largest['cases']:,} cases: the paired statistics and the"
        f" drift comparison are most of the work. At {largest['cases']:,} cases one evaluation"
        f" takes {largest['baseline_s']:.2f} s, {share:.1%} of a 5-minute interval on one core."
        f" Per case it costs between {per_case[0]:.2f} and {per_case[-1]:.2f} ms at every size"
        " measured, so it is harmless for canary suites of hundreds of cases and a CI gate,"
        " and the first place to look for a suite of tens of thousands."
    )
    what = (
        "`ragcanary.measure.evaluation.evaluate(run, settings, baseline)` in one process: scoring"
        " (5 measures x k = [1, 3, 5, 10], plus MRR), drift against the baseline and the verdict,"
        " whose permutation test runs 10,000 rounds per aggregate metric and whose bootstrap CI"
        " 2,000 resamples shared by all metrics."
        " Synthetic suites of labelled cases with 3 judged ids each, depth 10, a quarter of"
        " them re-ranked against the baseline (`build_runs` in `bench/evaluation.py`). The"
        " reference is the same run evaluated without a baseline (scoring and floors only);"
        " medians of the repeats shown after one warm-up call."
    )
    return section(what, "evaluation", figures, meaning)
