"""Exact scores computed from stored vectors, each as its database's search reports it.

For the presets whose API searches only approximately (Milvus, Pinecone, Weaviate), an id's
exact score is computed here from the vectors fetched for it, by the collection's own metric:
a similarity where the database reports one (higher is better), else a distance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ragcanary.probe.retries import QueryFailed

Vector = Sequence[float]


def dot(a: Vector, b: Vector) -> float:
    """The inner product."""
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def cosine(a: Vector, b: Vector) -> float:
    """The cosine similarity; a zero vector has none."""
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norms == 0:
        raise QueryFailed("bad_response", "a zero vector has no cosine similarity")
    return dot(a, b) / norms


def squared_l2(a: Vector, b: Vector) -> float:
    """The squared Euclidean distance (what Milvus's L2 and Pinecone's euclidean report)."""
    return math.fsum((x - y) ** 2 for x, y in zip(a, b, strict=True))


def manhattan(a: Vector, b: Vector) -> float:
    """The sum of absolute differences."""
    return math.fsum(abs(x - y) for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class Metric:
    """A score as one database's search reports it, and which way is better."""

    score: Callable[[Vector, Vector], float]
    lower_is_better: bool = False


def best_scores(
    records: Iterable[tuple[str, object]], vector: Vector, metric: Metric
) -> dict[str, float]:
    """Each id's best score over its records' stored vectors (its chunks) for ``vector``.

    Raises ``QueryFailed`` for a stored vector that is not a list of numbers of
    ``vector``'s size: the index cannot be scored, rather than scored wrongly.
    """
    best: dict[str, float] = {}
    for doc, stored in records:
        score = metric.score(vector, _numbers(stored, len(vector)))
        kept = best.get(doc)
        if kept is None or (score < kept if metric.lower_is_better else score > kept):
            best[doc] = score
    return best


def _numbers(stored: object, size: int) -> list[float]:
    if not isinstance(stored, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in stored
    ):
        raise QueryFailed("bad_response", "a stored vector is not a list of numbers")
    if len(stored) != size:
        raise QueryFailed(
            "bad_response", f"a stored vector has {len(stored)} numbers, the query's {size}"
        )
    return [float(x) for x in stored]
