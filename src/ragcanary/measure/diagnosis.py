"""Which layer broke: why each judged relevant id left its canary's top-k, and the run's cause.

A regression says *that* retrieval got worse; on-call needs *where*. For every judged relevant
id that the baseline returned for a canary and this run did not, the first reason that the
evidence establishes is kept, in this order (docs/report.md, "diagnosis"):

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

The run's cause is the one that accounts for the most lost ids (ties: the order of
``CAUSES``), unless the run is unavailable (``outage``, or ``config`` when the answers did not
fit the config) or passed without crossing a drift threshold (``none``). A run that no lost id
explains is named for its drifted query vectors (``query_embedding``), for scores that drifted
while its query vectors did not (``index_changed``), for a target's endpoint whose answers
diverge from its url's (``replica_divergence``: an RBO under ``min_rank_overlap``), for
canaries that came back with fewer results than in the baseline run (``short_results``: a
filter or a shrinking index, seen without labels), else ``unknown``. Diverged endpoints and
shorter answers are listed among the causes whenever they are seen.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from ragcanary.measure.absent import ABSENT, Absent
from ragcanary.measure.endpoints import DEFAULT_MIN_OVERLAP, EndpointComparison
from ragcanary.measure.results import Answer, RunResult, ScoreOrder
from ragcanary.measure.short_results import ShortResults
from ragcanary.measure.vectors import CHANGED_BELOW, EmbeddingDrift

Why = Literal[
    "id_renamed", "not_in_index", "query_moved", "ann_miss", "doc_changed", "outranked", "unknown"
]
Cause = Literal[
    "none",
    "outage",
    "config",
    "query_embedding",
    "index_lost",
    "ann_miss",
    "index_changed",
    "ids_changed",
    "outranked",
    "replica_divergence",
    "short_results",
    "unknown",
]
# How far an exact score may sit past the k-th returned one and still count as a tie: the
# database computes in float32, the exact score may come from stored vectors in float64.
TIE = 1e-5
# Over this share of (canary, id) pairs whose score moved beyond score_drift, the scores
# drifted: the same share RagCanaryScoreDrift fires on (deploy/prometheus/alerts.yml).
SCORES_DRIFTED = 0.5
# Every cause, in the order that breaks a tie between them.
CAUSES: tuple[Cause, ...] = get_args(Cause)
CAUSE_OF: Mapping[Why, Cause] = {
    "id_renamed": "ids_changed",
    "not_in_index": "index_lost",
    "query_moved": "query_embedding",
    "ann_miss": "ann_miss",
    "doc_changed": "index_changed",
    "outranked": "outranked",
    "unknown": "unknown",
}


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
class CauseEvidence:
    """One cause found in the run: the canaries and ids it accounts for, and the evidence."""

    cause: Cause
    cases: tuple[str, ...]
    ids: tuple[str, ...]
    evidence: str


@dataclass(frozen=True)
class Checked:
    """Which evidence the diagnosis had: what it could not check, it does not claim."""

    index_lookup: bool = False  # the index was asked about the ids that left, in this run
    exact_search: bool = False  # their exact scores for the run's query vectors were computed
    query_vectors: bool = False  # both runs' query vectors were compared


@dataclass(frozen=True)
class AnnRecall:
    """How often the approximate search kept what it should at depth ``k``: of the judged
    relevant (canary, id) pairs the baseline run returned and the index still holds (under that
    id), the share this run did not miss (``1 - ann_miss / pairs``)."""

    k: int
    value: float
    pairs: int  # how many (canary, id) pairs it was measured on


@dataclass(frozen=True)
class Diagnosis:
    """The run's leading cause, a line naming it, every cause found, and what was checked."""

    cause: Cause
    summary: str
    causes: tuple[CauseEvidence, ...] = ()
    checked: Checked = Checked()
    lookup_s: float | None = None  # what asking the index took, in seconds
    # Left out of reports written before it was measured; None: could not be told.
    ann_recall: AnnRecall | Absent | None = ABSENT


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
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    cosines = embedding.per_case if embedding is not None else {}
    exact = evidence.exact or {}
    out: dict[str, tuple[LostId, ...]] = {}
    for result in run.results:
        earlier = before.get(result.case.id)
        if earlier is None or not result.answer.answered:
            continue
        now, held = set(result.answer.ids), set(earlier.ids)
        entered = {normalised(doc) for doc in result.answer.ids if doc not in held}
        scored = exact.get(result.case.id, {})
        lost = []
        for doc, grade in (result.case.relevant or {}).items():
            if grade <= 0 or doc not in held or doc in now:
                continue
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
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    pairs = 0
    for result in run.results:
        earlier = before.get(result.case.id)
        if earlier is None or not result.answer.answered:
            continue
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


def diagnose(
    lost: Mapping[str, Sequence[LostId]],
    *,
    outcome: str,
    misread: bool,
    evidence: IndexEvidence,
    embedding: EmbeddingDrift | None,
    embedding_threshold: float,
    baseline: bool = True,
    score_drifted_ratio: float | None = None,
    short: ShortResults | None = None,
    endpoints: Sequence[EndpointComparison] = (),
    min_overlap: float = DEFAULT_MIN_OVERLAP,
) -> Diagnosis:
    """The run's cause from what its verdict said and what the evidence established;
    ``baseline``: whether the run had a baseline run to lose ids against;
    ``score_drifted_ratio``: the share of (canary, id) pairs in both runs whose score moved
    beyond ``score_drift`` (over ``SCORES_DRIFTED``, a drift threshold crossed); ``short``: its
    canaries answered with fewer results than asked for (a cause only against a baseline that
    answered them with more, and only when no lost id names another); ``endpoints``: the
    target's other endpoints against its url, diverged where a canary's RBO is under
    ``min_overlap``."""
    looked, compared = evidence.gone is not None, embedding is not None
    exact = evidence.exact is not None

    def said(cause: Cause, summary: str, causes: tuple[CauseEvidence, ...] = ()) -> Diagnosis:
        checked = Checked(index_lookup=looked, exact_search=exact, query_vectors=compared)
        return Diagnosis(cause, summary, causes, checked, evidence.seconds)

    if outcome == "unavailable":
        if misread:
            return said("config", "the target answered, but the config's paths fit none of it")
        return said("outage", "too few canaries were answered: an outage, not a quality change")
    causes = _causes(lost, evidence, embedding)
    diverged = _diverged(endpoints, min_overlap)
    shrank = _shrank(short)
    # Every cause found, in the order of CAUSES: diverged endpoints and shorter answers are
    # listed even when they do not lead, so on-call sees them beside the lost ids.
    seen = [c for c in (diverged, shrank) if c is not None]
    found = _in_order((*causes, *seen)) if seen else causes
    drifted = embedding is not None and embedding.drift > embedding_threshold
    rescored = score_drifted_ratio is not None and score_drifted_ratio > SCORES_DRIFTED
    if outcome == "ok" and not drifted and not rescored:
        return said("none", "no regression and no drift", found)
    known = [c for c in causes if c.cause != "unknown"]
    if known:
        leading = max(known, key=lambda c: (len(c.ids), -CAUSES.index(c.cause)))
        return said(leading.cause, _summary(leading), found)
    if embedding is not None and drifted:
        return said(
            "query_embedding",
            f"the query vectors moved: embedding drift {embedding.drift:.4f}",
            found,
        )
    if rescored and embedding is not None:  # the queries stayed: the documents' scores moved
        share = f"{score_drifted_ratio:.0%}"
        return said(
            "index_changed",
            f"the scores of {share} of the (canary, id) pairs moved beyond score_drift while "
            "the query vectors did not: the documents were re-chunked or re-embedded",
            found,
        )
    if diverged is not None:
        return said("replica_divergence", _divergence_summary(endpoints, min_overlap), found)
    if shrank is not None and short is not None:
        return said("short_results", _short_summary(shrank, short.depth), found)
    done = {"index_lookup": looked, "query_vectors": compared, "exact_search": exact}
    unchecked = [name for name, checked in done.items() if not checked]
    without = "" if baseline else " (no baseline run: nothing to compare the run with)"
    missing = "; not checked: " + ", ".join(unchecked) if unchecked else ""
    return said("unknown", f"no layer could be named from the evidence{without}{missing}", found)


def _shrank(short: ShortResults | None) -> CauseEvidence | None:
    """``short_results``, when some canaries came back with fewer results than asked for and
    than the baseline run returned for them."""
    if short is None or not short.shorter:
        return None
    evidence = (
        f"answered with fewer than {short.depth} results, and fewer than in the baseline run "
        f"({len(short.cases)} short in this run): a metadata filter or a shrinking index"
    )
    return CauseEvidence("short_results", short.shorter, (), evidence)


def _in_order(causes: Sequence[CauseEvidence]) -> tuple[CauseEvidence, ...]:
    return tuple(sorted(causes, key=lambda c: CAUSES.index(c.cause)))


def _short_summary(cause: CauseEvidence, depth: int) -> str:
    n = len(cause.cases)
    canaries = f"{n} canar{'ies' if n != 1 else 'y'}"
    return f"{canaries} answered with fewer than {depth} results: {_listed(cause.cases)}"


def _diverged(endpoints: Sequence[EndpointComparison], min_overlap: float) -> CauseEvidence | None:
    """``replica_divergence`` over the canaries some endpoint answered under ``min_overlap``
    RBO with the url's answer; None when no endpoint did."""
    found = [(e, e.diverged(min_overlap)) for e in endpoints]
    found = [(e, cases) for e, cases in found if cases]
    if not found:
        return None
    cases = tuple(dict.fromkeys(case for _, diverged in found for case in diverged))
    evidence = "; ".join(
        f"endpoint {e.name} ({e.url}) answered {len(diverged)} of {e.answered} canaries with "
        f"an RBO under {min_overlap:g} against the target's url (lowest {e.rbo_min:.2f})"
        for e, diverged in found
    )
    return CauseEvidence("replica_divergence", cases, (), evidence)


def _divergence_summary(endpoints: Sequence[EndpointComparison], min_overlap: float) -> str:
    """The endpoint that diverges most, and its canaries under ``min_overlap``."""
    diverged = [e for e in endpoints if e.diverged(min_overlap)]
    worst = min(diverged, key=lambda e: e.rbo_min if e.rbo_min is not None else 1.0)
    cases = worst.diverged(min_overlap)
    n = len(cases)
    shown = ", ".join(cases[:5]) + (f" and {n - 5} more" if n > 5 else "")
    others = len(diverged) - 1
    also = f"; {others} other endpoint{'s' if others != 1 else ''} too" if others else ""
    return (
        f"endpoint {worst.name} answers {n} canar{'ies' if n != 1 else 'y'} unlike the "
        f"target's url (RBO down to {worst.rbo_min:.2f}, under {min_overlap:g}): {shown}{also}"
    )


def _causes(
    lost: Mapping[str, Sequence[LostId]],
    evidence: IndexEvidence,
    embedding: EmbeddingDrift | None,
) -> tuple[CauseEvidence, ...]:
    by_cause: dict[Cause, list[tuple[str, str]]] = {}
    for case, ids in lost.items():
        for item in ids:
            by_cause.setdefault(CAUSE_OF[item.why], []).append((case, item.id))
    found = []
    for cause in CAUSES:
        pairs = by_cause.get(cause)
        if not pairs:
            continue
        cases = tuple(dict.fromkeys(case for case, _ in pairs))
        docs = tuple(dict.fromkeys(doc for _, doc in pairs))
        found.append(CauseEvidence(cause, cases, docs, _evidence(cause, evidence, embedding)))
    return tuple(found)


def _evidence(cause: Cause, evidence: IndexEvidence, embedding: EmbeddingDrift | None) -> str:
    if cause == "index_lost":
        at = evidence.at.isoformat() if evidence.at else "in this run"
        return f"looked up at {at}: not found"
    if cause == "ids_changed":
        return "an id that entered equals it after normalisation (NFKC, case, white space)"
    if cause == "query_embedding" and embedding is not None:
        return f"the canary's query vector moved (embedding drift {embedding.drift:.4f})"
    at = f" at {evidence.at.isoformat()}" if evidence.at else " in this run"
    if cause == "ann_miss":
        return (
            f"held by the index, and its exact score{at} ranks it inside the top-k: "
            "the approximate search left it out"
        )
    if cause == "index_changed":
        return (
            f"held by the index, the query vector unchanged, but its own score{at} moved "
            "beyond score_drift against the baseline's: re-chunked or re-embedded"
        )
    if cause == "outranked":
        return f"held by the index with its score unchanged{at}: other documents now rank above it"
    return "not established: neither a look-up, a renamed id, a moved query nor an exact score"


def _listed(names: Sequence[str]) -> str:
    """The first five of ``names``, and how many more."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


# What happened to the judged documents a lost-id cause accounts for, as its summary says it.
SUMMARIES: Mapping[Cause, str] = {
    "index_lost": "left the index",
    "ids_changed": "came back under another id",
    "query_embedding": "lost after the query vectors moved",
    "ann_miss": "missed by the approximate search although in the index",
    "index_changed": "changed in the index (re-chunked or re-embedded)",
    "outranked": "outranked by other documents",
}


def _summary(cause: CauseEvidence) -> str:
    n = len(cause.ids)
    what = SUMMARIES.get(cause.cause, "lost")
    return f"{n} judged document{'s' if n != 1 else ''} {what}: {_listed(cause.ids)}"
