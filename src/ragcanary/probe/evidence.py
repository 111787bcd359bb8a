"""Evidence for the diagnosis, gathered in the run: what the index says of the ids that left."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from ragcanary.measure.diagnosis import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.stale import left_top_k

# Which of the ids the target's index no longer holds; None when it cannot tell.
Missing = Callable[[Sequence[str]], Awaitable[set[str] | None]]


async def index_evidence(
    missing: Missing,
    run: RunResult,
    baseline: RunResult | None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> IndexEvidence:
    """Ask the index, now, about every judged relevant id that left its canary's top-k
    against ``baseline`` (only those: the cost grows with what changed, not with the suite);
    never a remembered answer. Nothing left, or a target that cannot look ids up: the
    evidence says nothing (``gone`` is None) and the diagnosis says it was not checked."""
    left = left_top_k(run, baseline)
    if not left:
        return IndexEvidence()
    at = now()
    started = time.perf_counter()
    gone = await missing(left)
    seconds = round(time.perf_counter() - started, 4)
    return IndexEvidence(frozenset(gone) if gone is not None else None, at, seconds)
