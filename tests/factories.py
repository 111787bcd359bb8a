"""Small builders of cases, runs and run reports for tests: the one place a test makes one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ragcanary.measure.cases import Case
from ragcanary.measure.report_json import unmarshal
from ragcanary.measure.results import ANSWERED, OUTCOMES, Answer, CaseResult, Outcome, RunResult
from ragcanary.measure.run_report import RunReport


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


STARTED_AT = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def run_report(run_id: str = "run", **fields: Any) -> RunReport:
    """A run's report (``report_data``'s JSON, read as ``unmarshal`` reads it)."""
    return unmarshal(report_data(run_id, **fields))


def report_data(
    run_id: str = "run",
    *,
    suite: str = "core",
    target: str = "search",
    started_at: datetime | str = STARTED_AT,
    duration_s: float | None = 0.5,
    outcome: str = "ok",
    coverage: float | None = 1.0,
    metrics: Mapping[str, float | None] | None = None,
    metrics_by_tag: Mapping[str, Mapping[str, float | None]] | None = None,
    baseline: Mapping[str, Any] | None = None,
    failures: Sequence[Mapping[str, Any]] = (),
    regressions: Sequence[Mapping[str, Any]] = (),
    counts: Mapping[str, Any] | None = None,
    cases: Sequence[Mapping[str, Any]] = (),
    **more: Any,
) -> dict[str, Any]:
    """A run's report as JSON, with the keys ``measure.report_json.marshal`` writes, in its
    order.

    For tests that need a report without evaluating a run (a real one: ``build_report(
    evaluate(run(...), ...))``); every test that writes one by hand builds it here.
    ``counts`` left out is counted from ``cases`` (``case_entry``); ``more`` adds what the
    daemon adds to a report (``claim``, ``stale_labels``, ``index_lookup``).
    """
    entries = [dict(entry) for entry in cases]
    return {
        "suite": suite,
        "target": target,
        "run_id": run_id,
        "started_at": started_at if isinstance(started_at, str) else started_at.isoformat(),
        "duration_s": duration_s,
        "outcome": outcome,
        "coverage": coverage,
        "metrics": dict(metrics or {}),
        "metrics_by_tag": {tag: dict(values) for tag, values in (metrics_by_tag or {}).items()},
        "baseline": dict(baseline) if baseline is not None else None,
        "failures": [dict(failure) for failure in failures],
        "regressions": [dict(regression) for regression in regressions],
        "counts": dict(counts) if counts is not None else _counts(entries),
        "cases": entries,
        **more,
    }


def case_entry(
    case_id: str,
    *,
    query: str | None = None,
    kind: str = "labelled",
    outcome: str = "ok",
    ids: Sequence[str] = (),
    scores: Sequence[float | None] | None = None,
    latency_s: float | None = 0.02,
    error: str | None = None,
    metrics: Mapping[str, float | None] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """One entry of a report's ``cases`` as JSON, as ``marshal`` writes it; scores default to 1.0,
    0.99, ... down the ids. ``more`` adds ``vs_baseline``, ``embedding_cosine`` or
    ``query_vector``."""
    return {
        "id": case_id,
        "query": query if query is not None else f"query {case_id}",
        "kind": kind,
        "outcome": outcome,
        "ids": list(ids),
        "scores": list(scores) if scores is not None else [1.0 - i / 100 for i in range(len(ids))],
        "latency_s": latency_s,
        "error": error,
        "metrics": dict(metrics or {}),
        **more,
    }


def _counts(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(str(entry.get("outcome", "ok")) for entry in cases)
    kinds = Counter(str(entry.get("kind", "labelled")) for entry in cases)
    return {
        "cases": len(cases),
        "answered": sum(outcomes[outcome] for outcome in ANSWERED),
        "labelled": kinds["labelled"],
        "negative": kinds["negative"],
        "label_free": kinds["label_free"],
        "outcomes": {outcome: outcomes[outcome] for outcome in OUTCOMES},
    }
