"""Which layer broke: why each judged relevant id left its canary's top-k, and the run's cause.

A regression says *that* retrieval got worse; on-call needs *where*. For every judged relevant
id that the baseline returned for a canary and this run did not, the first reason that the
evidence establishes is kept, in this order (docs/report.md, "diagnosis"):

- ``id_renamed``: an id that entered the list equals it once both are normalised (Unicode
  NFKC, case, surrounding white space): the document is there under another id;
- ``not_in_index``: the target's index, asked in this run, no longer holds it;
- ``query_moved``: the canary's query vector moved against the baseline's (another model);
- ``unknown``: nothing above could be established. ``ann_miss``, ``doc_changed`` and
  ``outranked`` need the id's stored vector or an exact search, which this version does not
  do: the diagnosis says so (``checked``) rather than guess.

The run's cause is the one that accounts for the most lost ids (ties: the order of
``CAUSES``), unless the run is unavailable (``outage``, or ``config`` when the answers did not
fit the config) or passed without crossing a drift threshold (``none``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from ragcanary.measure.results import RunResult
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
    exact_search: bool = False  # an exact search ranked them (not done by this version)
    query_vectors: bool = False  # both runs' query vectors were compared


@dataclass(frozen=True)
class Diagnosis:
    """The run's leading cause, a line naming it, every cause found, and what was checked."""

    cause: Cause
    summary: str
    causes: tuple[CauseEvidence, ...] = ()
    checked: Checked = Checked()
    lookup_s: float | None = None  # what asking the index took, in seconds


def normalised(doc: str) -> str:
    """An id as ``id_renamed`` compares it: NFKC, case-folded, without surrounding space."""
    return unicodedata.normalize("NFKC", doc).casefold().strip()


def lost_ids(
    run: RunResult,
    baseline: RunResult | None,
    evidence: IndexEvidence,
    embedding: EmbeddingDrift | None,
) -> dict[str, tuple[LostId, ...]]:
    """Per canary answered in both runs, each judged relevant id (grade above 0) that the
    baseline returned and this run did not, with the first reason the evidence gives."""
    if baseline is None:
        return {}
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    cosines = embedding.per_case if embedding is not None else {}
    out: dict[str, tuple[LostId, ...]] = {}
    for result in run.results:
        earlier = before.get(result.case.id)
        if earlier is None or not result.answer.answered:
            continue
        now, held = set(result.answer.ids), set(earlier.ids)
        entered = {normalised(doc) for doc in result.answer.ids if doc not in held}
        lost = []
        for doc, grade in (result.case.relevant or {}).items():
            if grade <= 0 or doc not in held or doc in now:
                continue
            lost.append(LostId(doc, _why(doc, entered, evidence, result.case.id, cosines)))
        out[result.case.id] = tuple(lost)
    return out


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
) -> Diagnosis:
    """The run's cause from what its verdict said and what the evidence established;
    ``baseline``: whether the run had a baseline run to lose ids against."""
    looked, compared = evidence.gone is not None, embedding is not None

    def said(cause: Cause, summary: str, causes: tuple[CauseEvidence, ...] = ()) -> Diagnosis:
        checked = Checked(index_lookup=looked, query_vectors=compared)
        return Diagnosis(cause, summary, causes, checked, evidence.seconds)

    if outcome == "unavailable":
        if misread:
            return said("config", "the target answered, but the config's paths fit none of it")
        return said("outage", "too few canaries were answered: an outage, not a quality change")
    causes = _causes(lost, evidence, embedding)
    drifted = embedding is not None and embedding.drift > embedding_threshold
    if outcome == "ok" and not drifted:
        return said("none", "no regression and no drift", causes)
    known = [c for c in causes if c.cause != "unknown"]
    if known:
        leading = max(known, key=lambda c: (len(c.ids), -CAUSES.index(c.cause)))
        return said(leading.cause, _summary(leading), causes)
    if embedding is not None and drifted:
        return said(
            "query_embedding", f"the query vectors moved: embedding drift {embedding.drift:.4f}"
        )
    unchecked = [
        name for name, done in (("index_lookup", looked), ("query_vectors", compared)) if not done
    ]
    without = "" if baseline else " (no baseline run: nothing to compare the run with)"
    return said(
        "unknown",
        f"no layer could be named from the evidence{without}; not checked: "
        + ", ".join([*unchecked, "exact_search"]),
        causes,
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
    return "not established: neither a look-up, a renamed id nor a moved query explains it"


def _summary(cause: CauseEvidence) -> str:
    ids = ", ".join(cause.ids[:5]) + (
        f" and {len(cause.ids) - 5} more" if len(cause.ids) > 5 else ""
    )
    n = len(cause.ids)
    documents = f"{n} judged document{'s' if n != 1 else ''}"
    if cause.cause == "index_lost":
        return f"{documents} left the index: {ids}"
    if cause.cause == "ids_changed":
        return f"{documents} came back under another id: {ids}"
    if cause.cause == "query_embedding":
        return f"{documents} lost after the query vectors moved: {ids}"
    return f"{documents} lost: {ids}"
