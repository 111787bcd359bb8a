"""One run judged as a whole: scores, drift and verdict against an optional baseline run."""

from __future__ import annotations

from dataclasses import dataclass

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.drift import Drift, align_run, compare_runs
from ragcanary.measure.results import RunResult
from ragcanary.measure.scoring import RunScores, score_run
from ragcanary.measure.verdict import Policy, Verdict, judge


@dataclass(frozen=True)
class Evaluation:
    """Everything ragcanary concludes from one run; reports and metrics are rendered from it."""

    run: RunResult
    scores: RunScores
    verdict: Verdict
    drift: Drift | None = None
    baseline_run_id: str | None = None


def policy_for(suite: SuiteConfig) -> Policy:
    """The suite's thresholds as the verdict needs them."""
    t = suite.thresholds
    return Policy(
        floors=t.floors(),
        max_drop=t.max_drop,
        significance=t.significance,
        min_rank_overlap=t.min_rank_overlap,
        min_coverage=suite.min_coverage,
    )


def evaluate(run: RunResult, suite: SuiteConfig, baseline: RunResult | None = None) -> Evaluation:
    """Score ``run``, compare it with ``baseline`` (scored with the same labels), and judge it.

    Per-case metrics are compared with the baseline's after the reorderings that the run's
    own score noise explains are undone (``drift.align_run``: near-ties within the measured
    score jitter, never wider than twice ``score_drift``). A retriever that shuffles near-ties
    from run to run is then no regression, while documents that left the top-k still are. So
    the verdict's deltas and regressed cases are beyond noise; ``scores`` stay as answered.
    """
    scores = score_run(run, suite.k, suite.depth, suite.gain)
    if baseline is None:
        return Evaluation(run, scores, judge(scores, run.coverage, policy_for(suite)))
    baseline_scores = score_run(baseline, suite.k, suite.depth, suite.gain)
    drift = compare_runs(run, baseline, suite.depth, suite.thresholds.score_drift)
    aligned = align_run(run, baseline, drift.tie_tolerance(suite.thresholds.score_drift))
    compared = scores if aligned is run else score_run(aligned, suite.k, suite.depth, suite.gain)
    verdict = judge(scores, run.coverage, policy_for(suite), baseline_scores, drift, compared)
    return Evaluation(run, scores, verdict, drift, baseline.run_id)
