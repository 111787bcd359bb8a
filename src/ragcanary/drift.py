"""Comparing a run's ranked lists with its baseline's: rank overlap, score drift, ids that moved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import fmean

from ragcanary.comparison import ListComparison, compare_lists
from ragcanary.results import RunResult


@dataclass(frozen=True)
class Drift:
    """How a run's answers moved against the baseline's, over cases answered in both."""

    per_case: Mapping[str, ListComparison]
    rank_overlap: float | None  # mean RBO
    score_drift: float | None  # mean |score delta| of (case, id) pairs present in both
    score_drifted_ratio: float | None  # share of those pairs with |delta| above the threshold
    top_score_delta: float | None  # mean top-1 score delta


def compare_runs(
    current: RunResult, baseline: RunResult, depth: int, drift_threshold: float
) -> Drift:
    """Compare every case answered in both runs; label-free cases count here too."""
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    per_case: dict[str, ListComparison] = {}
    for result in current.results:
        old = before.get(result.case.id)
        if old is None or not result.answer.answered:
            continue
        per_case[result.case.id] = compare_lists(
            old.ids, old.scores, result.answer.ids, result.answer.scores, k=depth
        )
    deltas = [abs(d) for c in per_case.values() for d in c.score_deltas.values()]
    top_deltas = [c.top1_delta for c in per_case.values() if c.top1_delta is not None]
    return Drift(
        per_case=per_case,
        rank_overlap=fmean(c.rbo for c in per_case.values()) if per_case else None,
        score_drift=fmean(deltas) if deltas else None,
        # A small epsilon keeps float noise (0.1 - 0.05 != 0.05) from flagging pairs at the limit.
        score_drifted_ratio=(
            sum(d > drift_threshold + 1e-12 for d in deltas) / len(deltas) if deltas else None
        ),
        top_score_delta=fmean(top_deltas) if top_deltas else None,
    )
