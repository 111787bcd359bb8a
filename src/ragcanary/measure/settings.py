"""How a suite's runs are measured and judged, as plain values: the one input measure takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragcanary.measure.metrics import Gain
from ragcanary.measure.results import ScoreOrder
from ragcanary.measure.verdict import Policy


@dataclass(frozen=True)
class Settings:
    """Cut-offs, depth, gains and thresholds of one suite, built by the caller from its config.

    ``score_drift`` is the largest score move of one (case, id) pair that is still noise;
    ``policy`` is what fails a run; ``score_order`` is the target's score direction.
    """

    ks: Sequence[int]
    depth: int
    gain: Gain
    score_drift: float
    policy: Policy
    score_order: ScoreOrder = "desc"
    # 1 - mean cosine of the query vectors over which they moved (another model): a cause.
    embedding_drift: float = 0.01
