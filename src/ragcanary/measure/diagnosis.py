"""Which layer broke: the run's leading cause, from why its judged relevant ids left their
canaries' top-k (``lost_ids``) and what else the run showed.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from ragcanary.measure.absent import ABSENT, Absent
from ragcanary.measure.endpoints import DEFAULT_MIN_OVERLAP, EndpointComparison
from ragcanary.measure.lost_ids import AnnRecall, IndexEvidence, LostId, Why
from ragcanary.measure.short_results import ShortResults
from ragcanary.measure.vectors import EmbeddingDrift

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
class Diagnosis:
    """The run's leading cause, a line naming it, every cause found, and what was checked."""

    cause: Cause
    summary: str
    causes: tuple[CauseEvidence, ...] = ()
    checked: Checked = Checked()
    lookup_s: float | None = None  # what asking the index took, in seconds
    # Left out of reports written before it was measured; None: could not be told.
    ann_recall: AnnRecall | Absent | None = ABSENT


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
