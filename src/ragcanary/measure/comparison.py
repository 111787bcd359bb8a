"""Comparing two ranked lists: RBO, Jaccard@k, ids entered and left, rank moves, score deltas."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ragcanary.measure.metrics import dedupe
from ragcanary.measure.results import ScoreOrder


def _overlaps(short: Sequence[str], long: Sequence[str]) -> list[int]:
    """X_d for d = 1..len(long): ids in both ``short[:d]`` and ``long[:d]`` (lists deduplicated)."""
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    out: list[int] = []
    for d, item in enumerate(long):
        if d < len(short):
            mine = short[d]
            overlap += mine in seen_long
            seen_short.add(mine)
        overlap += item in seen_short
        seen_long.add(item)
        out.append(overlap)
    return out


def rbo(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap RBO_ext of two rankings, in [0, 1].

    Webber, Moffat & Zobel, "A similarity measure for indefinite rankings"
    (TOIS 2010), eq. 32, which also covers lists of different lengths: beyond
    the end of the shorter list (length s) its unseen items are assumed to agree
    with the longer one at the rate seen at depth s, and beyond the longer list
    (length l) the agreement at depth l is assumed to continue for ever. Lists
    are deduplicated first. Both empty gives 1.0, exactly one empty 0.0,
    identical lists exactly 1.0. Raises ``ValueError`` unless 0 < p < 1.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be strictly between 0 and 1, got {p}")
    first, second = dedupe(a), dedupe(b)
    if first == second:
        return 1.0
    if not first or not second:
        return 0.0
    short, long = (first, second) if len(first) <= len(second) else (second, first)
    s, n = len(short), len(long)
    x = _overlaps(short, long)
    x_s = x[s - 1]

    def agreement(d: int) -> float:
        # Past depth s the shorter list's unseen items are credited at its final agreement X_s / s.
        extrapolated = x_s * (d - s) / s if d > s else 0.0
        return (x[d - 1] + extrapolated) / d

    head = math.fsum(agreement(d) * p**d for d in range(1, n + 1)) * (1.0 - p) / p
    tail = agreement(n) * p**n
    # Rounding can carry an exact 0 or 1 a hair outside the range.
    return min(1.0, max(0.0, head + tail))


def jaccard(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """Jaccard similarity of the top-k sets of two rankings (deduplicated); both empty gives 1.0."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top_a, top_b = set(dedupe(a)[:k]), set(dedupe(b)[:k])
    union = top_a | top_b
    if not union:
        return 1.0
    return len(top_a & top_b) / len(union)


class Entry(NamedTuple):
    """An id at a 1-based rank of one list, with the score the target gave it.

    A named tuple, not a frozen dataclass: evaluating a run makes forty of these per canary,
    and a tuple is made in less than half the time.
    """

    id: str
    rank: int
    score: float | None


@dataclass(frozen=True)
class Move:
    """An id in the top-k of both lists at different 1-based ranks."""

    id: str
    before: int
    after: int


@dataclass(frozen=True)
class ListComparison:
    """How the current list of one case differs from its baseline list."""

    rbo: float
    jaccard: float
    entered: tuple[Entry, ...]  # in current top-k only; current rank and score, current order
    left: tuple[Entry, ...]  # in baseline top-k only; baseline rank and score, baseline order
    moves: tuple[Move, ...]  # in both top-k at different ranks; largest move first
    score_deltas: Mapping[str, float]  # id -> current - baseline, ids in both whole lists
    top1_delta: float | None  # current top-1 score - baseline top-1 score


def _ranked(ids: Sequence[str], scores: Sequence[float | None], name: str) -> dict[str, Entry]:
    if len(ids) != len(scores):
        raise ValueError(f"{name}: {len(ids)} ids but {len(scores)} scores")
    entries: dict[str, Entry] = {}
    for doc, score in zip(ids, scores, strict=True):
        if doc not in entries:
            # A NaN or infinite score cannot give a meaningful delta, so it counts as missing.
            usable = score if score is not None and math.isfinite(score) else None
            entries[doc] = Entry(doc, len(entries) + 1, usable)
    return entries


def _delta(before: Entry, after: Entry) -> float | None:
    if before.score is None or after.score is None:
        return None
    return after.score - before.score


def compare_lists(
    before_ids: Sequence[str],
    before_scores: Sequence[float | None],
    after_ids: Sequence[str],
    after_scores: Sequence[float | None],
    k: int,
    p: float = 0.9,
) -> ListComparison:
    """Compare the current (after) ranking of a case with its baseline (before) ranking.

    Both lists are deduplicated, each id keeping the rank and score of its first
    position. RBO and score deltas use the whole lists; Jaccard, entered, left and
    moves the top-k. Scores that are ``None`` or not finite count as missing.
    Raises ``ValueError`` when ids and scores differ in length or k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if after_ids == before_ids and after_scores == before_scores:
        return _unchanged(after_ids, after_scores, k, p)
    before = _ranked(before_ids, before_scores, "before")
    after = _ranked(after_ids, after_scores, "after")
    before_top = {doc: e for doc, e in before.items() if e.rank <= k}
    after_top = {doc: e for doc, e in after.items() if e.rank <= k}

    entered = tuple(e for doc, e in after_top.items() if doc not in before_top)
    left = tuple(e for doc, e in before_top.items() if doc not in after_top)
    moves = sorted(
        (
            Move(doc, before_top[doc].rank, e.rank)
            for doc, e in after_top.items()
            if doc in before_top and before_top[doc].rank != e.rank
        ),
        key=lambda m: (-abs(m.after - m.before), m.after),
    )
    score_deltas: dict[str, float] = {}
    for doc, now in after.items():
        if doc in before and (delta := _delta(before[doc], now)) is not None:
            score_deltas[doc] = delta
    top1_delta = None
    if before and after:
        top1_delta = _delta(next(iter(before.values())), next(iter(after.values())))
    return ListComparison(
        rbo=rbo(list(before), list(after), p),
        jaccard=jaccard(list(before), list(after), k),
        entered=entered,
        left=left,
        moves=tuple(moves),
        score_deltas=score_deltas,
        top1_delta=top1_delta,
    )


def _unchanged(
    ids: Sequence[str], scores: Sequence[float | None], k: int, p: float
) -> ListComparison:
    """``compare_lists`` of a list with itself, what an unchanged target answers: the same
    figures, without ranking both lists and matching them id by id."""
    first = _ranked(ids, scores, "before")  # the name the general path's error would give
    deltas = {doc: e.score - e.score for doc, e in first.items() if e.score is not None}
    top = next(iter(first.values()), None)
    ranked = list(first)
    return ListComparison(
        rbo=rbo(ranked, ranked, p),
        jaccard=jaccard(ranked, ranked, k),
        entered=(),
        left=(),
        moves=(),
        score_deltas=deltas,
        top1_delta=top.score - top.score if top is not None and top.score is not None else None,
    )


def align_ties(
    ids: Sequence[str],
    scores: Sequence[float | None],
    reference_ids: Sequence[str],
    reference_scores: Sequence[float | None],
    tolerance: float,
    order: ScoreOrder = "desc",
) -> tuple[str, ...]:
    """``ids`` with the reorderings that score noise explains undone, as ``reference`` had them.

    An approximate index with jittering scores swaps results whose scores are nearly tied,
    and trades the last result for one just past the end of the list. Neither is a change
    in quality, so before per-case metrics are compared with the baseline (``reference``):

    - consecutive results whose score falls by at most ``tolerance`` from one to the next
      are a tie group, put in the reference order (ids the reference lacks last, as they came);
    - ids the reference lacks at the end of the list give their places back to reference ids
      missing from ``ids`` whose reference score is within ``tolerance`` of theirs.

    Lists are deduplicated first; a result without a usable score is tied with nothing.
    ``order="asc"`` reads the scores as distances (lower is better).
    """
    if ids == reference_ids and len(ids) == len(scores) == len(reference_scores):
        return tuple(dedupe(ids))  # the same order: no tie group moves, no id is missing
    if order == "asc":
        scores = [None if s is None else -s for s in scores]
        reference_scores = [None if s is None else -s for s in reference_scores]
    current = list(_ranked(ids, scores, "ids").values())
    reference = _ranked(reference_ids, reference_scores, "reference")
    after_reference = len(reference)

    def reference_order(entry: Entry) -> int:
        return reference[entry.id].rank if entry.id in reference else after_reference

    aligned: list[Entry] = []
    group: list[Entry] = []
    for entry in current:
        if group and not _near_tie(group[-1].score, entry.score, 0.0, tolerance):
            aligned.extend(sorted(group, key=reference_order))  # sorted() is stable
            group = []
        group.append(entry)
    aligned.extend(sorted(group, key=reference_order))

    present = {e.id for e in current}
    missing = [e for e in reference.values() if e.id not in present]
    swaps = 0
    for entry in reversed(aligned):
        if entry.id in reference or swaps == len(missing):
            break
        if not _near_tie(missing[swaps].score, entry.score, -tolerance, tolerance):
            break
        swaps += 1
    kept = [e.id for e in aligned[: len(aligned) - swaps]]
    return (*kept, *(e.id for e in missing[:swaps]))


def _near_tie(first: float | None, second: float | None, low: float, high: float) -> bool:
    """Whether both scores are known and ``first - second`` lies in ``[low, high]``."""
    if first is None or second is None:
        return False
    # The epsilon keeps float noise (0.1 - 0.05 != 0.05) from splitting a tie at the limit.
    return low - 1e-12 <= first - second <= high + 1e-12
