"""Canaries answered with fewer results than the suite asked for: a filter or a shrinking index.

A retriever asked for ``depth`` results returns fewer only when fewer rows qualify: a metadata
filter (a tenant, a ``where:``) that now excludes documents, or an index that lost documents
or a whole shard. Nobody has to label anything for this to show, so it is counted on every
run (the report's ``counts.short``, ``ragcanary_result_count_short``) and, against a baseline
run, the canaries that came back shorter than before are a cause of the diagnosis
(``short_results``, docs/report.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragcanary.measure.results import RunResult


@dataclass(frozen=True)
class ShortResults:
    """The canaries of a run answered with fewer than ``depth`` results (``empty`` included),
    and those of them that the baseline run answered with more results."""

    depth: int
    cases: tuple[str, ...] = ()
    shorter: tuple[str, ...] = ()  # short now, and longer in the baseline run (answered there)


def short_results(run: RunResult, baseline: RunResult | None, depth: int) -> ShortResults:
    """Which answered canaries of ``run`` came back with fewer than ``depth`` ids, and which
    of those returned more in ``baseline`` (a canary unanswered in either run is no evidence)."""
    earlier = baseline.results if baseline is not None else ()
    before = {r.case.id: len(r.answer.ids) for r in earlier if r.answer.answered}
    now = {r.case.id: len(r.answer.ids) for r in run.results if r.answer.answered}
    cases = tuple(case for case, length in now.items() if length < depth)
    shorter = tuple(case for case in cases if before.get(case, 0) > now[case])
    return ShortResults(depth, cases, shorter)
