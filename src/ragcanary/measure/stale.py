"""Stale labels: relevant ids the target no longer returns for any canary, or no longer holds.

A label goes stale when its document was deleted, renamed or re-chunked under a new id (a
data migration): the canary that expects it then fails for a reason that has nothing to do
with retrieval quality. An id still returned for *some* canary is alive, even if it left
the top-k of its own; one returned for none over many runs is most likely gone
(``not_returned``). Where the target can look ids up, one its index does not hold is gone
for certain, at once (``missing``). The index is asked again, at once, about every relevant
id that left its canary's top-k against the baseline (``left_top_k``): a cached "still held"
must never outlive the run in which the document went.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Literal

from ragcanary.measure.cases import Case
from ragcanary.measure.results import Answer, RunResult, answered_in_both

Reason = Literal["not_returned", "missing"]


@dataclass(frozen=True, order=True)
class StaleLabel:
    case: str
    id: str
    reason: Reason = "not_returned"


def relevant_ids(cases: Iterable[Case]) -> list[str]:
    """Every id some case judges relevant (grade above 0), once each, sorted."""
    return sorted(
        {doc for case in cases for doc, grade in (case.relevant or {}).items() if grade > 0}
    )


def left_top_k(run: RunResult, baseline: RunResult | None) -> list[str]:
    """The relevant ids (grade above 0) that the baseline returned for a case and ``run`` did
    not return for it, once each, sorted; only cases answered in both runs count (an outage
    says nothing about the index)."""
    return sorted({doc for ids in left_by_case(run, baseline).values() for doc in ids})


def left_by_case(run: RunResult, baseline: RunResult | None) -> dict[str, list[str]]:
    """Per case answered in both runs and in ``run``'s order, the relevant ids (grade above 0)
    that the baseline returned for it and ``run`` did not, in the case's label order; cases
    that lost none are left out."""
    if baseline is None:
        return {}
    left: dict[str, list[str]] = {}
    for result, earlier in answered_in_both(run, baseline):
        lost = relevant_left(result.case, earlier, result.answer)
        if lost:
            left[result.case.id] = lost
    return left


def relevant_left(case: Case, before: Answer, now: Answer) -> list[str]:
    """The relevant ids (grade above 0) of ``case`` that ``before`` returned and ``now`` did
    not, in the case's label order."""
    held, kept = set(before.ids), set(now.ids)
    relevant = (case.relevant or {}).items()
    return [doc for doc, grade in relevant if grade > 0 and doc in held and doc not in kept]


def stale_labels(
    cases: Iterable[Case], returned: Set[str] | None, missing: Set[str] = frozenset()
) -> list[StaleLabel]:
    """Every (case, relevant id) whose id is ``missing`` from the index, or not in
    ``returned`` (None: too few runs to tell), in case order; missing wins."""
    labels = []
    for case in cases:
        for doc, grade in (case.relevant or {}).items():
            if grade <= 0:
                continue
            if doc in missing:
                labels.append(StaleLabel(case.id, doc, "missing"))
            elif returned is not None and doc not in returned:
                labels.append(StaleLabel(case.id, doc))
    return labels
