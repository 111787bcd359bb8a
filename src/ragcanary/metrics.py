"""Exact IR measures of one case (Hit@k, P@k, R@k, NDCG@k, AP@k, RR) and their weighted means."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

Gain = Literal["linear", "exponential"]


def dedupe(ids: Sequence[str]) -> list[str]:
    """``ids`` with later duplicates dropped, so every id keeps its first position."""
    return list(dict.fromkeys(ids))


def _gain(grade: int, gain: Gain) -> float:
    # Grades of 0 or below are judged non-relevant: they earn nothing under either gain.
    if grade <= 0:
        return 0.0
    return float(grade) if gain == "linear" else float(2**grade - 1)


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def case_metrics(
    ranking: Sequence[str],
    relevant: Mapping[str, int],
    ks: Sequence[int],
    depth: int,
    gain: Gain = "linear",
) -> dict[str, float]:
    """Every measure of one labelled case, equal to trec_eval on the same ranking.

    ``ranking`` is the order the target returned (deduplicated here, then cut to
    ``depth``); ``relevant`` maps judged ids to grades, grade > 0 being relevant.
    Returns ``hit_rate@k``, ``precision@k``, ``recall@k``, ``ndcg@k`` and ``ap@k``
    for every k in ``ks``, and ``rr``. Raises ``ValueError`` when ``relevant`` has
    no grade above 0 (negative and label-free cases have no such measures), or
    when ``depth`` or a k is below 1.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    if any(k < 1 for k in ks):
        raise ValueError(f"every k must be at least 1, got {list(ks)}")
    num_relevant = sum(1 for grade in relevant.values() if grade > 0)
    if num_relevant == 0:
        raise ValueError("relevant has no grade above 0; only labelled cases have metrics")

    ranked = dedupe(ranking)[:depth]
    grades = [relevant.get(doc, 0) for doc in ranked]
    is_relevant = [grade > 0 for grade in grades]
    gains = [_gain(grade, gain) for grade in grades]
    # The ideal ranking is built from every judged relevant id, retrieved or not.
    ideal = sorted((_gain(grade, gain) for grade in relevant.values() if grade > 0), reverse=True)

    # Precision at each relevant rank, summed up to rank r, for AP@k.
    precision_sum: list[float] = []
    hits, total = 0, 0.0
    for rank, rel in enumerate(is_relevant, start=1):
        if rel:
            hits += 1
            total += hits / rank
        precision_sum.append(total)

    hit_rate: dict[str, float] = {}
    precision: dict[str, float] = {}
    recall: dict[str, float] = {}
    ndcg: dict[str, float] = {}
    ap: dict[str, float] = {}
    for k in ks:
        found = sum(is_relevant[:k])
        hit_rate[f"hit_rate@{k}"] = 1.0 if found else 0.0
        # trec_eval divides P@k by k even when fewer than k results came back.
        precision[f"precision@{k}"] = found / k
        recall[f"recall@{k}"] = found / num_relevant
        ndcg[f"ndcg@{k}"] = _dcg(gains[:k]) / _dcg(ideal[:k])
        ap[f"ap@{k}"] = (precision_sum[min(k, len(ranked)) - 1] if ranked else 0.0) / num_relevant

    first = next((rank for rank, rel in enumerate(is_relevant, start=1) if rel), None)
    rr = 1.0 / first if first is not None else 0.0
    return {**hit_rate, **precision, **recall, **ndcg, **ap, "rr": rr}


def aggregate_name(case_metric: str) -> str:
    """A per-case metric's name once averaged: ``rr`` -> ``mrr``, ``ap@5`` -> ``map@5``."""
    # Aggregates read as the field names them: the mean of reciprocal ranks is MRR, of APs MAP.
    if case_metric == "rr":
        return "mrr"
    if case_metric.startswith("ap@"):
        return "m" + case_metric
    return case_metric


def aggregate(per_case: Sequence[tuple[Mapping[str, float], float]]) -> dict[str, float]:
    """Weighted mean of each metric present in all ``(metrics, weight)`` pairs, by aggregate name.

    Empty input, or weights that are all 0, give ``{}``: there is nothing to
    average. A negative weight raises ``ValueError``.
    """
    if any(weight < 0 for _, weight in per_case):
        raise ValueError("case weights must not be negative")
    total_weight = math.fsum(weight for _, weight in per_case)
    if not per_case or total_weight <= 0:
        return {}
    names = [name for name in per_case[0][0] if all(name in m for m, _ in per_case[1:])]
    return {
        aggregate_name(name): math.fsum(m[name] * w for m, w in per_case) / total_weight
        for name in names
    }
