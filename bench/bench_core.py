"""Benchmarks 2 and 3: evaluate() on large suites, and the per-case metric and RBO functions."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from timing import calls_per_second, median_seconds

from ragcanary.comparison import rbo
from ragcanary.config import SuiteConfig
from ragcanary.drift import compare_runs
from ragcanary.evaluation import evaluate, policy_for
from ragcanary.metrics import case_metrics
from ragcanary.results import Answer, CaseResult, RunResult
from ragcanary.scoring import score_run
from ragcanary.stats import bootstrap_ci, permutation_test
from ragcanary.suite import Case
from ragcanary.verdict import case_regressions, compare_scores

KS = [1, 3, 5, 10]
DEPTH = 10
POOL = 40  # candidate documents per case: rankings overlap the judged ids often, not always
CHANGED = 0.25  # share of cases whose ranking differs from the baseline's
PART_OF = "of which "  # names a step that is timed inside the step before it


@dataclass(frozen=True)
class EvaluationTiming:
    """evaluate() on one suite size, and where its time goes."""

    cases: int
    repeat: int
    total_s: float  # median of evaluate(run, suite, baseline)
    parts: dict[str, float]  # component -> seconds, one timed pass each

    @property
    def per_case_ms(self) -> float:
        return self.total_s * 1000 / self.cases


@dataclass(frozen=True)
class CoreRates:
    """Calls per second of the per-case functions evaluate() is built from."""

    case_metrics: float
    rbo: float


def build_runs(cases: int, seed: int = 0) -> tuple[RunResult, RunResult]:
    """A baseline run and a current run of ``cases`` labelled cases, ``CHANGED`` of them moved.

    Every case has 3 judged relevant ids (grades 1 or 2) among ``POOL`` candidates and is
    answered with ``DEPTH`` ids and distinct decreasing scores. In the current run a quarter
    of the cases get a different ranking and slightly shifted scores, like a small drift.
    """
    rng = random.Random(seed)
    suite = []
    for i in range(cases):
        judged = rng.sample(range(POOL), 3)
        relevant = {f"doc-{i}-{j}": rng.choice((1, 2)) for j in judged}
        suite.append(Case(f"case-{i:05d}", f"query {i}", relevant, tags=(f"tag-{i % 4}",)))
    baseline, current = [], []
    for case in suite:
        number = case.id.removeprefix("case-").lstrip("0") or "0"
        ids = tuple(f"doc-{number}-{j}" for j in rng.sample(range(POOL), DEPTH))
        scores = tuple(sorted((rng.random() for _ in ids), reverse=True))
        baseline.append(CaseResult(case, Answer(ids, scores, 0.02, "ok")))
        if rng.random() < CHANGED:
            ids = tuple(f"doc-{number}-{j}" for j in rng.sample(range(POOL), DEPTH))
            scores = tuple(max(0.0, s - rng.uniform(0.0, 0.1)) for s in scores)
        current.append(CaseResult(case, Answer(ids, scores, 0.02, "ok")))
    started = datetime(2026, 1, 1, tzinfo=UTC)
    return (
        RunResult("core", "search", "baseline", started, 1.0, tuple(baseline)),
        RunResult("core", "search", "current", started, 1.0, tuple(current)),
    )


def suite_config() -> SuiteConfig:
    """The contract's example suite settings: k [1, 3, 5, 10], depth 10, default thresholds."""
    return SuiteConfig(cases="core.yaml", targets=["search"], k=KS, depth=DEPTH)


def bench_evaluation(sizes: list[int], repeats: dict[int, int]) -> list[EvaluationTiming]:
    """Time evaluate() for each suite size, then each of its parts once."""
    config = suite_config()
    timings = []
    for size in sizes:
        baseline, current = build_runs(size)
        repeat = repeats.get(size, 1)
        total = median_seconds(
            functools.partial(evaluate, current, config, baseline), repeat, warmup=False
        )
        timings.append(EvaluationTiming(size, repeat, total, _parts(current, baseline, config)))
        print(f"  {size:>5} cases: evaluate {total * 1000:9.1f} ms")
    return timings


def _parts(current: RunResult, baseline: RunResult, config: SuiteConfig) -> dict[str, float]:
    """Each step evaluate() takes, timed alone; the statistics are split out of compare_scores."""
    parts: dict[str, float] = {}

    def timed(name: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = call()
        parts[name] = time.perf_counter() - start
        return result

    scores = timed("score_run (both runs)", lambda: _score_both(current, baseline, config))
    now, before = scores
    timed("compare_runs (drift)", lambda: compare_runs(current, baseline, DEPTH, 0.05))
    timed("case_regressions", lambda: case_regressions(now, before))
    timed("compare_scores", lambda: compare_scores(now, before, policy_for(config).seed))
    paired = sorted(set(now.per_case) & set(before.per_case))
    weights = [now.weights[c] for c in paired]
    metrics = list(now.per_case[paired[0]]) if paired else []
    deltas = [[now.per_case[c][m] - before.per_case[c][m] for c in paired] for m in metrics]
    timed(
        f"{PART_OF}permutation_test x {len(metrics)} metrics",
        lambda: [permutation_test(d, weights, alternative="less") for d in deltas],
    )
    timed(
        f"{PART_OF}bootstrap_ci x {len(metrics)} metrics",
        lambda: [bootstrap_ci(d, weights) for d in deltas],
    )
    return parts


def _score_both(current: RunResult, baseline: RunResult, config: SuiteConfig) -> tuple[Any, Any]:
    return (
        score_run(current, config.k, config.depth, config.gain),
        score_run(baseline, config.k, config.depth, config.gain),
    )


def bench_core(seconds: float) -> CoreRates:
    """case_metrics and rbo calls per second on depth-10 rankings, ``seconds`` for each."""
    baseline, current = build_runs(1000, seed=1)
    metric_inputs = [(r.answer.ids, r.case.relevant) for r in current.results]
    rbo_inputs = [
        (b.answer.ids, c.answer.ids if c.answer.ids != b.answer.ids else _swapped(b.answer.ids))
        for b, c in zip(baseline.results, current.results, strict=True)
    ]
    metrics_rate = calls_per_second(
        lambda pair: case_metrics(pair[0], pair[1], KS, DEPTH), metric_inputs, seconds
    )
    rbo_rate = calls_per_second(lambda pair: rbo(pair[0], pair[1]), rbo_inputs, seconds)
    print(f"  case_metrics {metrics_rate:,.0f}/s, rbo {rbo_rate:,.0f}/s")
    return CoreRates(metrics_rate, rbo_rate)


def _swapped(ids: tuple[str, ...]) -> tuple[str, ...]:
    """``ids`` with two neighbours swapped: rbo() returns at once for identical lists."""
    return (ids[1], ids[0], *ids[2:]) if len(ids) > 1 else ids
