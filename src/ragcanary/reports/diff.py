"""The on-call diff of two runs of a suite: which canaries got worse, which ids entered or left."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.measure.comparison import compare_lists
from ragcanary.measure.run_report import CaseEntry, Numbers, RunReport
from ragcanary.reports.report import reason_lines

_EPS = 1e-9


class ForeignRun(UsageError):
    """A run named for a diff belongs to another suite or target (API: 400)."""


def _changes(before: Numbers, after: Numbers) -> dict[str, dict[str, float]]:
    """Metrics present on both sides whose value moved."""
    return {
        name: {"from": old, "to": new, "delta": new - old}
        for name, old in before.items()
        if old is not None and (new := after.get(name)) is not None and abs(new - old) > _EPS
    }


def _scores(entry: CaseEntry) -> list[float | None]:
    scores = list(entry.scores)
    return scores if len(scores) == len(entry.ids) else [None] * len(entry.ids)


def diff_case(before: CaseEntry, after: CaseEntry, k: int) -> dict[str, Any]:
    """How one case moved between two report entries of it."""
    comparison = compare_lists(
        list(before.ids), _scores(before), list(after.ids), _scores(after), k=k
    )
    return {
        "id": after.id,
        "query": after.query,
        "outcome": {"from": before.outcome, "to": after.outcome},
        "metrics": _changes(before.metrics, after.metrics),
        "rbo": comparison.rbo,
        "entered": [{"id": e.id, "rank": e.rank, "score": e.score} for e in comparison.entered],
        "left": [{"id": e.id, "rank": e.rank, "score": e.score} for e in comparison.left],
        "moves": [{"id": m.id, "from": m.before, "to": m.after} for m in comparison.moves],
        "score_deltas": dict(comparison.score_deltas),
        "top_score_delta": comparison.top1_delta,
    }


def _changed(case: Mapping[str, Any]) -> bool:
    return bool(
        case["metrics"]
        or case["entered"]
        or case["left"]
        or case["moves"]
        or case["outcome"]["from"] != case["outcome"]["to"]
        or any(abs(d) > _EPS for d in case["score_deltas"].values())
    )


def _severity(case: Mapping[str, Any]) -> tuple[float, float, str]:
    """Sort key: the largest metric drop first, then the lowest rank overlap."""
    worst = min((c["delta"] for c in case["metrics"].values()), default=0.0)
    return (worst, case["rbo"], case["id"])


def run_summary(report: RunReport) -> dict[str, Any]:
    """What a diff shows of each run: when, its verdict and why, and how much was answered."""
    return {
        "run_id": report.run_id,
        "started_at": report.started_at.isoformat(),
        "outcome": report.outcome,
        "coverage": report.coverage,
        "reasons": reason_lines(report),
        "unanswered": report.unanswered(),
        # Which layer broke (docs/report.md, "diagnosis"); None for a report older than it.
        "diagnosis": (
            {"cause": report.diagnosis.cause, "summary": report.diagnosis.summary}
            if report.diagnosis is not None
            else None
        ),
    }


def _mark(entries: Any, relevant: Collection[str]) -> None:
    for entry in entries:
        entry["relevant"] = entry["id"] in relevant


def diff_reports(
    before: RunReport,
    after: RunReport,
    k: int | None = None,
    relevant: Mapping[str, Collection[str]] | None = None,
) -> dict[str, Any]:
    """Everything that changed from run ``before`` to run ``after``, worst cases first.

    ``k`` bounds the entered/left comparison (default: the longest list either run returned).
    Cases present in only one run are listed by id under ``added``/``removed``. ``relevant``
    (case id -> its relevant ids) marks each id that entered or left with ``relevant``; an
    id that left is marked ``stale``: ``missing`` (left the index), ``not_returned`` or None,
    when the newer run knew its stale labels.
    """
    old = {c.id: c for c in before.cases}
    new = {c.id: c for c in after.cases}
    depth = k or max([len(c.ids) for c in (*old.values(), *new.values())], default=1)
    # An unanswered run has no lists to compare: every id would look as if it left.
    outage = after.outcome == "unavailable"
    cases = [] if outage else [diff_case(old[i], new[i], max(depth, 1)) for i in new if i in old]
    changed = sorted((c for c in cases if _changed(c)), key=_severity)
    if relevant is not None:
        for case in changed:
            ids = relevant.get(case["id"], ())
            _mark(case["entered"], ids)
            _mark(case["left"], ids)
    # An id that left and is a stale label did not only leave this canary's top-k: the index
    # no longer holds it ("missing"), or no canary got it back for the suite's
    # stale_label_runs ("not_returned": most likely deleted or re-chunked). None: neither.
    stale = after.stale_labels
    if isinstance(stale, tuple):  # the run knew (enough runs, or an index lookup)
        gone: dict[str, str] = {}
        for label in stale:
            if gone.get(label.id) != "missing":  # one case's label says so: it left the index
                gone[label.id] = "missing" if label.reason == "missing" else "not_returned"
        for case in changed:
            for entry in case["left"]:
                entry["stale"] = gone.get(entry["id"])
    return {
        "suite": after.suite,
        "target": after.target,
        "from": run_summary(before),
        "to": run_summary(after),
        "outage": outage,
        "metrics": _changes(before.metrics, after.metrics),
        "cases": changed,
        "unchanged": len(cases) - len(changed),
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
    }
