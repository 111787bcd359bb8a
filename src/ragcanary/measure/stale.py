"""Stale labels: relevant ids the target no longer returns for any canary.

A label goes stale when its document was deleted, renamed or re-chunked under a new id (a
data migration): the canary that expects it then fails for a reason that has nothing to do
with retrieval quality. An id still returned for *some* canary is alive, even if it left
the top-k of its own; one returned for none over many runs is most likely gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from ragcanary.suites.suite import Case


@dataclass(frozen=True, order=True)
class StaleLabel:
    case: str
    id: str


def stale_labels(cases: Iterable[Case], returned: Set[str]) -> list[StaleLabel]:
    """Every (case, relevant id) whose id is not in ``returned``, in case order."""
    return [
        StaleLabel(case.id, doc)
        for case in cases
        for doc, grade in (case.relevant or {}).items()
        if grade > 0 and doc not in returned
    ]
