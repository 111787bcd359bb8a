"""What on-call engineers ask of storage: the diff between two runs and one canary's history."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.measure.cases import Case
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.diff import ForeignRun, diff_reports, run_summary
from ragcanary.store import overview
from ragcanary.store.run_ids import resolve_run_id
from ragcanary.store.storage import Store


def _report(store: Store, run_id: str, suite: str, target: str) -> RunReport:
    report = store.get_report(run_id)
    if report is None:
        raise UsageError(
            f"run {run_id}: no such run in storage; pick one from `ragcanary runs` "
            "or GET /api/v1/runs"
        )
    if report.pair != (suite, target):
        raise ForeignRun(
            f"run {run_id} is of suite {report.suite!r} on target "
            f"{report.target!r}, not of suite {suite!r} on target {target!r}; pick one "
            f"from `ragcanary runs --suite {suite} --target {target}`"
        )
    return report


def run_diff(
    store: Store,
    suite: str,
    target: str,
    from_run: str | None = None,
    to_run: str | None = None,
    k: int | None = None,
    relevant: Mapping[str, Collection[str]] | None = None,
    score_drift: float | None = None,
) -> dict[str, Any]:
    """Diff two stored runs; by default the pinned baseline (else the previous run) to the last.

    By default the last answered run is diffed; when the newest run of all was an outage, the
    diff says so under ``newest_outage`` rather than looking all clear. ``score_drift``: the
    suite's threshold, which flags the score moves over it.
    """
    before, after, newest_outage = diff_runs(store, suite, target, from_run, to_run)
    diff = diff_reports(before, after, k, relevant, score_drift)
    diff["newest_outage"] = newest_outage
    return diff


def diff_runs(
    store: Store,
    suite: str,
    target: str,
    from_run: str | None = None,
    to_run: str | None = None,
) -> tuple[RunReport, RunReport, dict[str, Any] | None]:
    """The two reports ``run_diff`` compares, chosen as it says, and the newest outage's summary
    (None unless ``to_run`` was left to default and the newest run was unavailable)."""
    # Runs are chosen by id, outcome and time alone: the run-level report of a regression of
    # many canaries lists every regressed case, and only the two diffed are read whole.
    pair = (suite, target)
    # Either run may be named by a unique prefix of its id, as `ragcanary run` prints it.
    from_run = resolve_run_id(store, from_run) if from_run is not None else None
    to_run = resolve_run_id(store, to_run) if to_run is not None else None
    newest_outage = None
    if to_run is None:
        newest = overview.newest_runs(store, [pair]).get(pair)
        if newest is None:
            raise UsageError(f"no run of suite {suite!r} on target {target!r} stored yet")
        if newest[2] == "unavailable":
            newest_outage = run_summary(overview.run_heads(store, [newest[0]])[newest[0]])
        latest = overview.newest_runs(store, [pair], answered=True).get(pair)
        if latest is None:
            raise UsageError(
                f"no answered run of suite {suite!r} on target {target!r} stored yet; the "
                f"newest, {newest[0]}, was unavailable (the target did not answer)"
            )
        to_run = latest[0]
    if from_run is None:
        from_run = store.get_baseline(suite, target)
        if from_run is None or from_run == to_run:
            recent = overview.recent_runs(store, suite, target, 50)
            earlier = [r for r in recent if r["run_id"] != to_run]
            answered = [r for r in earlier if r["outcome"] != "unavailable"]
            if not answered:
                raise UsageError(
                    f"nothing to diff {to_run} against: no baseline pinned and no earlier run"
                )
            from_run = answered[0]["run_id"]
    before = _report(store, from_run, suite, target)
    return before, _report(store, to_run, suite, target), newest_outage


def relevant_ids(cases: Sequence[Case]) -> dict[str, set[str]]:
    """Case id -> the ids judged relevant (grade above 0), to mark them in a diff."""
    return {c.id: {doc for doc, g in (c.relevant or {}).items() if g > 0} for c in cases}


def case_history(
    store: Store,
    suite: str,
    case: Case,
    target: str | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """One canary over time: its verdict in each run (``measure.case_verdict``) beside its
    query outcome, the rank of each relevant id and the top score."""
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
                "verdict": row.get("verdict"),
                "outcome": row["outcome"],  # of the query: did the target answer
                "error": row.get("error"),
                "top_id": ids[0] if ids else None,
                "top_score": row["top_score"],
                "relevant_ranks": {
                    doc: (ids.index(doc) + 1 if doc in ids else None) for doc in relevant
                },
            }
        )
    return history
