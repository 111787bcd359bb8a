"""Exact IR measures of one case (Hit@k, P@k, R@k, NDCG@k, AP@k, Judged@k, RR, bpref) and
their weighted means."""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Literal

Gain = Literal["linear", "exponential"]
_CUT_MEASURES = ("hit_rate", "precision", "recall", "ndcg", "ap", "judged")  # case_metrics' order
# Judged@k measures the labels, not the retriever: the share of the top-k that carries a
# judgment. A fall says the golden set went out of date, so it never fails a run by dropping.
JUDGED = "judged"


def dedupe(ids: Sequence[str]) -> list[str]:
    """``ids`` with later duplicates dropped, so every id keeps its first position."""
    return list(dict.fromkeys(ids))


def _ranked_judgments(
    ranking: Sequence[str], judged: Mapping[str, int], depth: int, distinct: int
) -> list[tuple[int, str]]:
    """(rank, id) of each id of ``judged`` in the deduplicated top ``depth``, best rank first.

    ``distinct`` is the number of distinct ids in ``ranking``.
    """
    # Only the few judged ids in the ranking are located: the set operation and index() scan
    # the ranking in C. An id's rank counts the distinct ids before its first occurrence, so
    # a duplicate never takes up a rank; without duplicates that is its position.
    unique = distinct == len(ranking)
    found = []
    for doc in judged.keys() & ranking:
        position = ranking.index(doc)
        rank = position + 1 if unique else len(set(ranking[:position])) + 1
        if rank <= depth:
            found.append((rank, doc))
    return sorted(found)


def case_metrics(
    ranking: Sequence[str],
    relevant: Mapping[str, int],
    ks: Sequence[int],
    depth: int,
    gain: Gain = "linear",
) -> dict[str, float]:
    """Every measure of one labelled case, equal to trec_eval (and ir_measures) on the ranking.

    ``ranking`` is the order the target returned (deduplicated here, then cut to
    ``depth``); ``relevant`` maps judged ids to grades, grade > 0 being relevant and
    grade 0 judged non-relevant. Returns ``hit_rate@k``, ``precision@k``, ``recall@k``,
    ``ndcg@k``, ``ap@k`` and ``judged@k`` for every k in ``ks``, then ``rr`` and
    ``bpref``. Raises ``ValueError`` when ``relevant`` has no grade above 0 (negative
    and label-free cases have no such measures), or when ``depth`` or a k is below 1.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    names = _metric_names(tuple(ks))
    # Grades of 0 or below are judged non-relevant: they earn nothing under either gain.
    linear = gain == "linear"
    gains = {
        doc: float(grade) if linear else float(2**grade - 1)
        for doc, grade in relevant.items()
        if grade > 0
    }
    num_relevant = len(gains)
    if num_relevant == 0:
        raise ValueError("relevant has no grade above 0; only labelled cases have metrics")

    # Every measure depends only on where the judged ids rank, so only they are visited.
    # After the j-th relevant id in rank order: the running DCG and sum of precisions (for
    # AP), summed in rank order as trec_eval does.
    distinct = len(set(ranking))
    judged = _ranked_judgments(ranking, relevant, depth, distinct)
    hits = [(rank, gains[doc]) for rank, doc in judged if doc in gains]
    dcg = [0.0]
    precision_sum = [0.0]
    for j, (rank, hit_gain) in enumerate(hits, start=1):
        dcg.append(dcg[-1] + hit_gain / math.log2(rank + 1))
        precision_sum.append(precision_sum[-1] + j / rank)
    ranks = [rank for rank, _ in hits]
    # The ideal ranking is built from every judged relevant id, retrieved or not.
    ideal = [0.0]
    for rank, best in enumerate(
        sorted(gains.values(), reverse=True)[: max(ks, default=0)], start=1
    ):
        ideal.append(ideal[-1] + best / math.log2(rank + 1))

    found = [bisect.bisect_right(ranks, k) for k in ks]  # relevant ids in the top k
    judged_ranks = [rank for rank, _ in judged]
    returned = min(distinct, depth)  # the ids within depth, duplicates dropped
    values = (
        [1.0 if n else 0.0 for n in found]
        # trec_eval divides P@k by k even when fewer than k results came back.
        + [n / k for n, k in zip(found, ks, strict=True)]
        + [n / num_relevant for n in found]
        + [dcg[n] / ideal[min(k, num_relevant)] for n, k in zip(found, ks, strict=True)]
        + [precision_sum[n] / num_relevant for n in found]
        + [_judged_share(judged_ranks, k, returned) for k in ks]
        + [1.0 / ranks[0] if ranks else 0.0, _bpref(judged, relevant, num_relevant)]
    )
    return dict(zip(names, values, strict=True))


def _judged_share(judged_ranks: Sequence[int], k: int, returned: int) -> float:
    """Judged@k as ir_measures computes it: judged ids among the top k over the ids there.

    Unlike P@k it divides by the ids returned when fewer than k came back (ir_measures cuts
    its cut-off to the ranking's length). An empty answer has nothing judged: 0.0, where
    ir_measures has no value (a run file has no line for it).
    """
    shown = min(k, returned)
    if shown == 0:
        return 0.0
    return bisect.bisect_right(judged_ranks, k) / shown


def _bpref(
    judged: Sequence[tuple[int, str]], relevant: Mapping[str, int], num_relevant: int
) -> float:
    """trec_eval's bpref over the judged ids in rank order; unjudged ids are passed over.

    Each relevant id earns 1 - min(n, R) / min(N, R), n being the judged non-relevant ids
    ranked above it, R the relevant ids and N the judged non-relevant ids of the case
    (retrieved or not); the sum is divided by R. With no judged non-relevant id (N = 0),
    every relevant id retrieved earns 1: bpref is then the share of R retrieved.
    """
    num_nonrelevant = len(relevant) - num_relevant  # the ids of grade 0
    nonrelevant_above = 0
    total = 0.0
    for _, doc in judged:
        if relevant[doc] > 0:
            if nonrelevant_above:
                total += 1.0 - min(nonrelevant_above, num_relevant) / min(
                    num_nonrelevant, num_relevant
                )
            else:
                total += 1.0
        else:
            nonrelevant_above += 1
    return total / num_relevant


@functools.lru_cache(maxsize=64)
def _metric_names(ks: tuple[int, ...]) -> tuple[str, ...]:
    """case_metrics' keys for ``ks``, in its order (made once: 25 f-strings per case add up)."""
    if any(k < 1 for k in ks):
        raise ValueError(f"every k must be at least 1, got {list(ks)}")
    return (*(f"{name}@{k}" for name in _CUT_MEASURES for k in ks), "rr", "bpref")


def is_judged_share(metric: str) -> bool:
    """Whether ``metric`` (``judged@10``) measures the labels' reach rather than the retriever."""
    return metric.partition("@")[0] == JUDGED


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
