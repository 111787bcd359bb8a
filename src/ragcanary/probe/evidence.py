"""Evidence for the diagnosis, gathered in the run: what the index says of the ids that left.

Two questions, both asked now and only about the judged relevant ids that left their canary's
top-k against the baseline (the cost grows with what changed, not with the suite): which of
them the index no longer holds, and, per canary answered by vector, the exact score of each
one it still holds for that canary's query vector in this run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.stale import left_by_case


class Index(Protocol):
    """What a target's index can say of ids; both answer None when it cannot tell, and
    never raise."""

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` the index no longer holds."""
        ...

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        """Each held id's exact score for ``vector``, as the target's search scores it (an id
        with several chunks: its best); ids the index does not hold are left out."""
        ...


async def index_evidence(
    index: Index,
    run: RunResult,
    baseline: RunResult | None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> IndexEvidence:
    """Ask the index, now, about every judged relevant id that left its canary's top-k
    against ``baseline``; never a remembered answer. Nothing left, or a target that cannot
    look ids up: the evidence says nothing (``gone`` is None) and the diagnosis says it was not
    checked. Exact scores are asked per canary that has a query vector and lost an id the
    index still holds, one canary at a time; a canary whose scores cannot be had is left out,
    and when none were had, ``exact`` is None (not checked)."""
    left = left_by_case(run, baseline)
    if not left:
        return IndexEvidence()
    at = now()
    started = time.perf_counter()
    gone = await index.missing(sorted({doc for ids in left.values() for doc in ids}))
    vectors = {r.case.id: r.vector for r in run.results if r.vector is not None}
    exact: dict[str, dict[str, float]] = {}
    for case, ids in left.items():
        held = [doc for doc in ids if gone is None or doc not in gone]
        vector = vectors.get(case)
        if not held or vector is None:
            continue
        found = await index.scores(held, vector)
        if found is not None:
            exact[case] = found
    seconds = round(time.perf_counter() - started, 4)
    return IndexEvidence(frozenset(gone) if gone is not None else None, at, seconds, exact or None)
