"""Small builders of cases and runs for the pure-core tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ragcanary.measure.cases import Case
from ragcanary.measure.results import Answer, CaseResult, Outcome, RunResult


def case(
    case_id: str,
    relevant: Mapping[str, int] | Sequence[str] | None = None,
    **fields: object,
) -> Case:
    grades = dict.fromkeys(relevant, 1) if isinstance(relevant, list | tuple) else relevant
    return Case(id=case_id, query=f"query {case_id}", relevant=grades, **fields)  # type: ignore[arg-type]


def answer(
    ids: Sequence[str], scores: Sequence[float] | None = None, outcome: Outcome = "ok"
) -> Answer:
    if outcome not in ("ok", "empty"):
        return Answer((), (), 0.01, outcome, error=f"simulated {outcome}")
    got = tuple(scores) if scores is not None else tuple(1.0 - i / 100 for i in range(len(ids)))
    return Answer(tuple(ids), got, 0.01, "ok" if ids else "empty")


def run(pairs: Sequence[tuple[Case, Answer]], run_id: str = "run") -> RunResult:
    return RunResult(
        suite="core",
        target="search",
        run_id=run_id,
        started_at=datetime(2026, 11, 22, tzinfo=UTC),
        duration_s=0.5,
        results=tuple(CaseResult(c, a) for c, a in pairs),
    )
