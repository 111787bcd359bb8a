"""What on-call engineers ask of storage: the diff between two runs and one canary's history."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.reports.diff import diff_reports
from ragcanary.store.storage import Store
from ragcanary.suites.suite import Case


def _report(store: Store, run_id: str) -> dict[str, Any]:
    report = store.get_report(run_id)
    if report is None:
        raise UsageError(
            f"run {run_id}: no such run in storage; pick one from `ragcanary history` "
            "or GET /api/v1/runs"
        )
    return report


def run_diff(
    store: Store,
    suite: str,
    target: str,
    from_run: str | None = None,
    to_run: str | None = None,
    k: int | None = None,
) -> dict[str, Any]:
    """Diff two stored runs; by default the pinned baseline (else the previous run) to the last."""
    if to_run is None:
        latest = store.latest_run(suite, target, exclude_unavailable=True)
        if latest is None:
            raise UsageError(f"no answered run of suite {suite!r} on target {target!r} stored yet")
        to_run = latest["run_id"]
    if from_run is None:
        from_run = store.get_baseline(suite, target)
        if from_run is None or from_run == to_run:
            earlier = [r for r in store.list_runs(suite, target, limit=50) if r["run_id"] != to_run]
            answered = [r for r in earlier if r["outcome"] != "unavailable"]
            if not answered:
                raise UsageError(
                    f"nothing to diff {to_run} against: no baseline pinned and no earlier run"
                )
            from_run = answered[0]["run_id"]
    return diff_reports(_report(store, from_run), _report(store, to_run), k)


def case_history(
    store: Store,
    suite: str,
    case: Case,
    target: str | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """One canary over time: the rank of each relevant id, the top score and the outcome."""
    start = (now or datetime.now().astimezone()) - since if since else None
    rows = store.case_history(suite, case.id, target=target, since=start)
    relevant = [doc for doc, grade in (case.relevant or {}).items() if grade > 0]
    history = []
    for row in rows:
        ids = list(row.get("ids") or [])
        history.append(
            {
                "run_id": row["run_id"],
                "started_at": row["started_at"],
                "target": row["target"],
                "outcome": row["outcome"],
                "error": row.get("error"),
                "top_id": ids[0] if ids else None,
                "top_score": row["top_score"],
                "relevant_ranks": {
                    doc: (ids.index(doc) + 1 if doc in ids else None) for doc in relevant
                },
            }
        )
    return history
