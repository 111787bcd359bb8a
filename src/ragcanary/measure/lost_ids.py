"""Why each judged relevant id left its canary's top-k, from the evidence gathered in the run.

For every judged relevant id that the baseline returned for a canary and this run did not, the
first reason that the evidence establishes is kept, in this order (docs/report.md,
"diagnosis"):

- ``id_renamed``: an id that entered the list equals it once both are normalised (Unicode
  NFKC, case, surrounding white space): the document is there under another id;
- ``not_in_index``: the target's index, asked in this run, no longer holds it;
- ``query_moved``: the canary's query vector moved against the baseline's (another model);
- ``ann_miss``: the index holds it and its exact score for this run's query vector (computed
  in this run from its stored vectors, or by the database) would rank it inside the top-k,
  yet the approximate search left it out;
- ``doc_changed``: its exact score moved against the score the baseline returned for it by
  more than ``score_drift``: its document was re-chunked or re-embedded;
- ``outranked``: held, with an unchanged score: other documents now rank above it;
- ``unknown``: nothing above could be established (the diagnosis says what was not checked
  in ``checked`` rather than guess).

The same reasons give the approximate search's recall on judged documents (``ann_recall``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ragcanary.measure.results import Answer, RunResult, ScoreOrder, answered_in_both
from ragcanary.measure.stale import relevant_left
from ragcanary.measure.vectors import CHANGED_BELOW, EmbeddingDrift

Why = Literal[
    "id_renamed", "not_in_index", "query_moved", "ann_miss", "doc_changed", "outranked", "unknown"
]
# How far an exact score may sit past the k-th returned one and still count as a tie: the
# database computes in float32, the exact score may come from stored vectors in float64.
TIE = 1e-5


@dataclass(frozen=True)
class IndexEvidence:
    """What the target's index said in this run of the relevant ids that left their top-k:
    those it no longer holds (None: it cannot tell, or was not asked), when, and how long the
    look-up took."""

    gone: frozenset[str] | None = None
    at: datetime | None = None
    seconds: float | None = None
    # Per canary, the exact score of each of its lost ids that the index still holds, for the
    # canary's query vector in this run; None: not computed (no vectors, or the preset can't).
    exact: Mapping[str, Mapping[str, float]] | None = None


@dataclass(frozen=True)
class LostId:
    """A judged relevant id that left its canary's top-k, and why (a case's ``lost``)."""

    id: str
    why: Why


@dataclass(frozen=True)
class AnnRecall:
    """How often the approximate search kept what it should at depth ``k``: of the judged
    relevant (canary, id) pairs the baseline run returned and the index still holds (under that
    id), the share this run did not miss (``1 - ann_miss / pairs``)."""

    k: int
    value: float
    pairs: int  # how many (canary, id) pairs it was measured on


def normalised(doc: str) -> str:
    """An id as ``id_renamed`` compares it: NFKC, case-folded, without surrounding space."""
    return unicodedata.normalize("NFKC", doc).casefold().strip()


@dataclass(frozen=True)
class Ranking:
    """How a run's scores rank and what moved: the order of its scores, how many results it
    asked for, and by how much an id's own score must move to count as changed."""

    order: ScoreOrder = "desc"
    depth: int | None = None  # None: the answer's own length
    score_drift: float = 0.03


def lost_ids(
    run: RunResult,
    baseline: RunResult | None,
    evidence: IndexEvidence,
    embedding: EmbeddingDrift | None,
    ranking: Ranking = Ranking(),
) -> dict[str, tuple[LostId, ...]]:
    """Per canary answered in both runs, each judged relevant id (grade above 0) that the
    baseline returned and this run did not, with the first reason the evidence gives."""
    if baseline is None:
        return {}
    cosines = embedding.per_case if embedding is not None else {}
    exact = evidence.exact or {}
    out: dict[str, tuple[LostId, ...]] = {}
    for result, earlier in answered_in_both(run, baseline):
        held = set(earlier.ids)
        entered = {normalised(doc) for doc in result.answer.ids if doc not in held}
        scored = exact.get(result.case.id, {})
        lost = []
        for doc in relevant_left(result.case, earlier, result.answer):
            why = _why(doc, entered, evidence, result.case.id, cosines)
            if why == "unknown" and doc in scored:
                why = _scored(scored[doc], result.answer, _score_of(earlier, doc), ranking)
            lost.append(LostId(doc, why))
        out[result.case.id] = tuple(lost)
    return out


def ann_recall(
    run: RunResult,
    baseline: RunResult | None,
    lost: Mapping[str, Sequence[LostId]],
    depth: int,
) -> AnnRecall | None:
    """The approximate search's recall at ``depth`` on the judged relevant ids the baseline
    returned (``AnnRecall``); None when it cannot be told: no baseline, a run not searched by
    vector, no such pair, or a lost id whose reason is ``unknown`` (it may have been missed)."""
    if baseline is None or not any(r.vector is not None for r in run.results):
        return None
    if any(item.why == "unknown" for items in lost.values() for item in items):
        return None
    pairs = 0
    for result, earlier in answered_in_both(run, baseline):
        returned = set(earlier.ids[:depth])
        relevant = (result.case.relevant or {}).items()
        pairs += sum(1 for doc, grade in relevant if grade > 0 and doc in returned)
    elsewhere = ("not_in_index", "id_renamed")  # no longer there to be found under that id
    pairs -= sum(1 for items in lost.values() for item in items if item.why in elsewhere)
    if pairs <= 0:
        return None
    missed = sum(1 for items in lost.values() for item in items if item.why == "ann_miss")
    return AnnRecall(depth, 1.0 - missed / pairs, pairs)


def _scored(exact: float, answer: Answer, before: float | None, ranking: Ranking) -> Why:
    """Why a held id whose query did not move left the top-k, from its exact score now:
    inside the returned k-th score (or a short answer) an exact search keeps it, so the
    approximate one missed it; else its own score moved, or others outranked it."""
    depth = ranking.depth or len(answer.ids)
    kept = answer.scores[:depth]
    if len(kept) < depth:
        return "ann_miss"
    last = kept[-1]
    if last is None or before is None:
        return "unknown"
    tie = TIE * max(1.0, abs(last))
    inside = exact < last - tie if ranking.order == "asc" else exact > last + tie
    if inside:
        return "ann_miss"
    if abs(exact - before) > ranking.score_drift:
        return "doc_changed"
    return "outranked"


def _score_of(answer: Answer, doc: str) -> float | None:
    """The score ``answer`` gave ``doc`` where it first ranked it (its best chunk)."""
    for found, score in zip(answer.ids, answer.scores, strict=False):
        if found == doc:
            return score
    return None


def _why(
    doc: str,
    entered: set[str],
    evidence: IndexEvidence,
    case: str,
    cosines: Mapping[str, float | None],
) -> Why:
    if normalised(doc) in entered:
        return "id_renamed"
    if evidence.gone is not None and doc in evidence.gone:
        return "not_in_index"
    if case in cosines:
        cosine = cosines[case]
        if cosine is None or cosine < CHANGED_BELOW:  # another length, or it moved
            return "query_moved"
    return "unknown"
