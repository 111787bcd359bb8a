"""The diff page's content: per changed case, the two top-k lists side by side, marked, with
the case's score moves, its query vector's cosine and why the newer run lost each lost id."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragcanary.measure.run_report import ABSENT, Absent, CaseEntry, RunReport

PAGE_CASES = 25  # changed cases per page: each shows two lists of up to `depth` ids

# A lost id's `why` (docs/report.md, "diagnosis") in words, for its mark on the page.
WHY_TEXT: Mapping[str, str] = {
    "id_renamed": "renamed",
    "not_in_index": "not in the index",
    "query_moved": "query vector moved",
    "ann_miss": "ANN miss",
    "doc_changed": "document changed",
    "outranked": "outranked",
    "unknown": "unknown",
}


@dataclass(frozen=True)
class Slot:
    """One id at one rank of one side of the diff."""

    rank: int
    id: str
    score: float | None
    relevant: bool
    change: str  # "left" / "entered" (not in the other list), "moved", or "kept"
    other_rank: int | None  # its rank on the other side
    score_delta: float | None  # after - before, when it is on both sides
    stale: str | None = None  # a relevant id that is a stale label: why, in words
    drifted: bool = False  # its score moved over the suite's score_drift
    why: str | None = None  # a lost id: why the newer run lost it (a diagnosis `why`)


@dataclass(frozen=True)
class CaseDiff:
    """One changed case: what the diff says of it, and its two lists."""

    id: str
    query: str
    outcome_from: str | None
    outcome_to: str | None
    metrics: Mapping[str, Mapping[str, float]]
    rbo: float | None
    top_score_delta: float | None
    before: list[Slot]
    after: list[Slot]
    left: list[Mapping[str, Any]]
    entered: list[Mapping[str, Any]]
    stale: Mapping[str, str]  # the case's stale labels in the later run: id -> why, in words
    # Ids in both runs whose score moved ({"id", "from", "to", "delta", "drifted"}), largest
    # move first; the cosine of the two query vectors, ABSENT when not known, and if it moved.
    score_moves: list[Mapping[str, Any]] = field(default_factory=list)
    embedding_cosine: float | Absent | None = ABSENT
    embedding_moved: bool = False
    why: Mapping[str, str] = field(default_factory=dict)  # lost id -> why the newer run lost it

    @property
    def vectors_compared(self) -> bool:
        """Whether the two runs' query vectors of the case could be compared."""
        return not isinstance(self.embedding_cosine, Absent)


def _ranked(entry: CaseEntry | None, depth: int) -> list[tuple[str, float | None]]:
    if entry is None:
        return []
    ids = list(entry.ids)
    scores = list(entry.scores)
    if len(scores) != len(ids):
        scores = [None] * len(ids)
    seen: set[str] = set()
    ranked = []
    for doc, score in zip(ids, scores, strict=True):
        if doc in seen:  # a duplicate keeps its first position, as the metrics do
            continue
        seen.add(doc)
        ranked.append((doc, score))
    return ranked[:depth]


def _side(
    mine: list[tuple[str, float | None]],
    other: list[tuple[str, float | None]],
    relevant: Collection[str],
    absent: str,
    before: bool,
    stale: Mapping[str, str],
    drifted: Collection[str] = (),
    why: Mapping[str, str] | None = None,
) -> list[Slot]:
    ranks = {doc: rank for rank, (doc, _) in enumerate(other, start=1)}
    scores = dict(other)
    slots = []
    for rank, (doc, score) in enumerate(mine, start=1):
        other_rank = ranks.get(doc)
        delta = None
        if other_rank is not None and score is not None and scores.get(doc) is not None:
            other_score = scores[doc]
            assert other_score is not None
            delta = (other_score - score) if before else (score - other_score)
        change = absent if other_rank is None else ("kept" if other_rank == rank else "moved")
        marked = doc in relevant
        lost = (why or {}).get(doc) if change == "left" else None
        slots.append(
            Slot(
                rank,
                doc,
                score,
                marked,
                change,
                other_rank,
                delta,
                stale.get(doc) if marked else None,
                doc in drifted,
                lost,
            )
        )
    return slots


def case_diffs(
    changed: Sequence[Mapping[str, Any]],
    before: RunReport,
    after: RunReport,
    depth: int,
    relevant: Mapping[str, Collection[str]],
    stale: Mapping[str, Mapping[str, str]] | None = None,
) -> list[CaseDiff]:
    """The changed cases of a ``diff_reports`` result with both runs' lists, cut to ``depth``;
    ``stale``: per case, its relevant ids that are stale labels and why, in words."""
    old = {c.id: c for c in before.cases}
    new = {c.id: c for c in after.cases}
    out = []
    for case in changed:
        case_id = str(case["id"])
        first, second = _ranked(old.get(case_id), depth), _ranked(new.get(case_id), depth)
        marked = relevant.get(case_id, ())
        gone = (stale or {}).get(case_id, {})
        moves = list(case.get("score_moves", ()))
        drifted = {str(m["id"]) for m in moves if m.get("drifted")}
        why = {str(e["id"]): str(e["why"]) for e in case["left"] if e.get("why")}
        out.append(
            CaseDiff(
                id=case_id,
                query=str(case.get("query") or ""),
                outcome_from=case["outcome"]["from"],
                outcome_to=case["outcome"]["to"],
                metrics=case["metrics"],
                rbo=case.get("rbo"),
                top_score_delta=case.get("top_score_delta"),
                before=_side(first, second, marked, "left", True, gone, drifted, why),
                after=_side(second, first, marked, "entered", False, gone, drifted),
                left=case["left"],
                entered=case["entered"],
                stale=gone,
                score_moves=moves,
                embedding_cosine=case.get("embedding_cosine", ABSENT),
                embedding_moved=bool(case.get("embedding_moved")),
                why=why,
            )
        )
    return out
