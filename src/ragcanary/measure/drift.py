"""Comparing a run's ranked lists with its baseline's: rank overlap, score drift, ids that moved."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from statistics import fmean, median

from ragcanary.measure.comparison import ListComparison, align_ties, compare_lists
from ragcanary.measure.results import RunResult, ScoreOrder, answered_in_both

# Scaled by this, the mean absolute deviation estimates a normal spread's standard deviation.
_MEAN_DEVIATION_TO_SD = math.sqrt(math.pi / 2)
# Score moves under this many standard deviations of the score noise count as noise.
NOISE_SPREADS = 3.0


@dataclass(frozen=True)
class Drift:
    """How a run's answers moved against the baseline's, over cases answered in both."""

    per_case: Mapping[str, ListComparison]
    rank_overlap: float | None  # mean RBO
    score_drift: float | None  # mean |score delta| of (case, id) pairs present in both
    score_drifted_ratio: float | None  # share of those pairs with |delta| above the threshold
    top_score_delta: float | None  # mean top-1 score delta
    # Mean signed score delta of those pairs: which way the scores moved (drift hides the sign).
    score_shift: float | None = None
    # Spread of the score deltas of pairs in both runs around their median: the target's score
    # jitter, which a shift that moves every score alike leaves alone.
    score_noise: float | None = None

    def tie_tolerance(self, score_drift: float) -> float:
        """Score gap under which two results count as tied: NOISE_SPREADS times the noise.

        Never above twice ``score_drift``: two results whose scores each moved by less than
        that (noise, by the suite's own threshold) can only have swapped from that close.
        0 once the spread itself exceeds ``score_drift``: the scores drifted (a re-embedded or
        noisy index, a new model), and a reordering is then a change, never noise.
        """
        if self.score_noise is None or self.score_noise > score_drift + 1e-12:
            return 0.0
        return min(2 * score_drift, NOISE_SPREADS * self.score_noise)


def compare_runs(
    current: RunResult, baseline: RunResult, depth: int, drift_threshold: float
) -> Drift:
    """Compare every case answered in both runs; label-free cases count here too."""
    per_case: dict[str, ListComparison] = {}
    for result, old in answered_in_both(current, baseline):
        per_case[result.case.id] = compare_lists(
            old.ids, old.scores, result.answer.ids, result.answer.scores, k=depth
        )
    signed = [d for c in per_case.values() for d in c.score_deltas.values()]
    deltas = [abs(d) for d in signed]
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
        score_noise=_spread(signed) if signed else None,
        score_shift=fmean(signed) if signed else None,
    )


def _spread(values: list[float]) -> float:
    """Standard deviation estimated from the mean absolute deviation from the median.

    Unlike the median absolute deviation it is not 0 when most scores did not move at all,
    and a few large moves (re-embedded documents) weigh less than in the standard deviation.
    """
    center = median(values)
    return _MEAN_DEVIATION_TO_SD * fmean(abs(v - center) for v in values)


def align_run(
    current: RunResult, baseline: RunResult, tolerance: float, order: ScoreOrder = "desc"
) -> RunResult:
    """``current`` with each answer's noise-explained reorderings undone (``align_ties``).

    Per-case metrics of the result differ from the baseline's only where the ranking changed
    beyond score near-ties within ``tolerance``; unanswered cases and cases the baseline did
    not answer stay as they are. Returns ``current`` itself when nothing moved.
    """
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    results = []
    for result in current.results:
        old, new = before.get(result.case.id), result.answer
        if old is not None and new.answered:
            ids = align_ties(new.ids, new.scores, old.ids, old.scores, tolerance, order)
            if ids != new.ids:
                # Scores stay as answered: only per-case metrics, which read ids, use this run.
                result = replace(result, answer=replace(new, ids=ids, scores=(None,) * len(ids)))
        results.append(result)
    if all(a is b for a, b in zip(results, current.results, strict=True)):
        return current
    return replace(current, results=tuple(results))
