"""Embedding drift: how far each canary's query vector moved from the baseline run's.

The same query embedded by the same model gives the same vector (to float rounding), so a
cosine under 1 says the embedding side changed: a new model, or a new version behind the
same name. That tells an on-call engineer whether a score shift came from the embedding
endpoint or from the index.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragcanary.measure.results import RunResult

# A query vector whose cosine with the baseline's is below this moved. Recomputing one on
# another machine or batch moves it far less (float rounding: 1e-6 and under).
CHANGED_BELOW = 0.999


@dataclass(frozen=True)
class EmbeddingDrift:
    """The query vectors of a run against the baseline's, over cases embedded in both.

    A vector of another dimension, or a zero vector, has no cosine with the baseline's: its
    ``per_case`` cosine is None, and it counts as unrelated (cosine 0) in ``drift`` and as
    changed in ``changed_ratio``.
    """

    per_case: Mapping[str, float | None]  # case id -> cosine with the baseline's vector
    drift: float  # 1 - mean cosine
    changed_ratio: float  # share of cases whose cosine is below CHANGED_BELOW
    # (baseline, current) vector lengths, when any case's differ: a new model, not a drift.
    dimensions: tuple[int, int] | None = None


def cosine(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The cosine of two vectors of one length, in [-1, 1]; None for a zero vector or lengths
    that differ."""
    if len(a) != len(b):
        return None
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norms == 0.0 or not math.isfinite(norms):
        return None
    dot = math.fsum(map(operator.mul, a, b))
    return max(-1.0, min(1.0, dot / norms))


def compare_vectors(current: RunResult, baseline: RunResult) -> EmbeddingDrift | None:
    """Each case's query vector against its baseline's; None when no case has both."""
    before = {r.case.id: r.vector for r in baseline.results if r.vector is not None}
    per_case: dict[str, float | None] = {}
    dimensions = None
    for result in current.results:
        old = before.get(result.case.id)
        if old is None or result.vector is None:
            continue
        per_case[result.case.id] = cosine(old, result.vector)
        if len(old) != len(result.vector):
            dimensions = (len(old), len(result.vector))
    if not per_case:
        return None
    cosines = [0.0 if c is None else c for c in per_case.values()]
    changed = sum(c is None or c < CHANGED_BELOW for c in per_case.values())
    return EmbeddingDrift(
        per_case=per_case,
        drift=max(0.0, 1.0 - math.fsum(cosines) / len(cosines)),
        changed_ratio=changed / len(per_case),
        dimensions=dimensions,
    )
