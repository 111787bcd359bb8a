"""The on-call diff of two runs of a suite: which canaries got worse, which ids entered or left,
and beside them how each canary's scores and query vector drifted and why its lost ids left."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.measure.comparison import compare_lists
from ragcanary.measure.fingerprint import fingerprint_changes
from ragcanary.measure.metrics import is_judged_share
from ragcanary.measure.report_json import marshal_fingerprint
from ragcanary.measure.run_report import ABSENT, Absent, CaseEntry, Numbers, RunReport
from ragcanary.measure.vectors import CHANGED_BELOW, cosine
from ragcanary.reports.report import reason_lines

_EPS = 1e-9
# As measure.drift counts a drifted pair: float noise (0.1 - 0.05 != 0.05) is not over the limit.
_OVER = 1e-12


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


def _score_moves(
    before: CaseEntry, after: CaseEntry, deltas: Mapping[str, float], score_drift: float | None
) -> list[dict[str, Any]]:
    """Each id in both lists whose score moved, with both scores as served, largest move first
    (equal moves in the newer run's order); ``drifted``: its move is over ``score_drift``
    (never, when the threshold is unknown)."""
    old, new = _first_scores(before), _first_scores(after)
    rank = {doc: i for i, doc in enumerate(new)}
    moves = []
    for doc, delta in deltas.items():
        if abs(delta) <= _EPS:
            continue
        drifted = score_drift is not None and abs(delta) > score_drift + _OVER
        moves.append(
            {"id": doc, "from": old[doc], "to": new[doc], "delta": delta, "drifted": drifted}
        )
    # Rounded to _EPS: a shift of all scores by 0.15 moves each by 0.15 give or take 1e-16.
    return sorted(moves, key=lambda m: (-round(abs(m["delta"]), 9), rank[m["id"]]))


def _first_scores(entry: CaseEntry) -> dict[str, float | None]:
    """Each id's score where it first ranks, as ``compare_lists`` pairs them."""
    found: dict[str, float | None] = {}
    for doc, score in zip(entry.ids, _scores(entry), strict=True):
        found.setdefault(doc, score)
    return found


def _query_cosine(before: CaseEntry, after: CaseEntry, measured: bool) -> float | Absent | None:
    """The cosine of the case's query vectors in the two runs; None for vectors of other
    lengths or a zero vector; ABSENT when it cannot be told.

    From the vectors both reports hold, while the query is the one both were made for; else
    the later report's own ``embedding_cosine`` when ``measured`` (the later run was compared
    with the earlier one). Storage keeps vectors only for baselines and each pair's newest run.
    """
    if before.query == after.query:
        old, new = before.vector(), after.vector()
        if old is not None and new is not None:
            return cosine(old, new)
    return after.embedding_cosine if measured else ABSENT


def diff_case(
    before: CaseEntry,
    after: CaseEntry,
    k: int,
    score_drift: float | None = None,
    measured: bool = False,
) -> dict[str, Any]:
    """How one case moved between two report entries of it; ``score_drift`` flags the score
    moves over it, ``measured``: the later entry's ``embedding_cosine`` is against ``before``."""
    comparison = compare_lists(
        list(before.ids), _scores(before), list(after.ids), _scores(after), k=k
    )
    lost = after.vs_baseline.lost if after.vs_baseline is not None else None
    why = {gone.id: gone.why for gone in lost or ()}
    left = []
    for e in comparison.left:
        entry: dict[str, Any] = {"id": e.id, "rank": e.rank, "score": e.score}
        if e.id in why:  # the later run's diagnosis of a judged id it lost
            entry["why"] = why[e.id]
        left.append(entry)
    found = {
        "id": after.id,
        "query": after.query,
        "outcome": {"from": before.outcome, "to": after.outcome},
        "metrics": _changes(before.metrics, after.metrics),
        "rbo": comparison.rbo,
        "entered": [{"id": e.id, "rank": e.rank, "score": e.score} for e in comparison.entered],
        "left": left,
        "moves": [{"id": m.id, "from": m.before, "to": m.after} for m in comparison.moves],
        "score_deltas": dict(comparison.score_deltas),
        "top_score_delta": comparison.top1_delta,
        "score_moves": _score_moves(before, after, comparison.score_deltas, score_drift),
    }
    vectors = _query_cosine(before, after, measured)
    if not isinstance(vectors, Absent):
        found["embedding_cosine"] = vectors
        found["embedding_moved"] = vectors is None or vectors < CHANGED_BELOW
    return found


def _changed(case: Mapping[str, Any]) -> bool:
    return bool(
        case["metrics"]
        or case["entered"]
        or case["left"]
        or case["moves"]
        or case["outcome"]["from"] != case["outcome"]["to"]
        or any(abs(d) > _EPS for d in case["score_deltas"].values())
        or case.get("embedding_moved", False)
    )


def _severity(case: Mapping[str, Any]) -> tuple[float, float, str]:
    """Sort key: the largest metric drop first, then the lowest rank overlap. A fall of
    judged@k is the labels' age, not a drop: it does not rank a case."""
    worst = min(
        (c["delta"] for name, c in case["metrics"].items() if not is_judged_share(name)),
        default=0.0,
    )
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
        # The run its report was compared with: what its lost ids' `why` is measured against.
        "baseline_run_id": report.baseline.run_id if report.baseline is not None else None,
        # Which layer broke (docs/report.md, "diagnosis"); None for a report older than it.
        "diagnosis": (
            {"cause": report.diagnosis.cause, "summary": report.diagnosis.summary}
            if report.diagnosis is not None
            else None
        ),
        # What the run was made with (docs/report.md, "fingerprint"); None: older than it.
        "fingerprint": (
            marshal_fingerprint(report.fingerprint) if report.fingerprint is not None else None
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
    score_drift: float | None = None,
) -> dict[str, Any]:
    """Everything that changed from run ``before`` to run ``after``, worst cases first.

    ``k`` bounds the entered/left comparison (default: the longest list either run returned).
    Cases present in only one run are listed by id under ``added``/``removed``. ``relevant``
    (case id -> its relevant ids) marks each id that entered or left with ``relevant``; an
    id that left is marked ``stale``: ``missing`` (left the index), ``not_returned`` or None,
    when the newer run knew its stale labels; and with ``why`` when the newer run's diagnosis
    named why it lost that id. ``score_drift`` (the suite's ``thresholds.score_drift``) flags
    each case's score moves over it as ``drifted``.
    """
    old = {c.id: c for c in before.cases}
    new = {c.id: c for c in after.cases}
    depth = k or max([len(c.ids) for c in (*old.values(), *new.values())], default=1)
    # An unanswered run has no lists to compare: every id would look as if it left.
    outage = after.outcome == "unavailable"
    measured = after.baseline is not None and after.baseline.run_id == before.run_id
    cases = (
        []
        if outage
        else [
            diff_case(old[i], new[i], max(depth, 1), score_drift, measured) for i in new if i in old
        ]
    )
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
        # What the two runs were made with that differs, shown before anything else: a new
        # embedding model or a smaller index explains the rest of the diff.
        "fingerprint_changes": [
            {"field": c.field, "from": c.before, "to": c.after, "text": c.text}
            for c in fingerprint_changes(before.fingerprint, after.fingerprint)
        ],
        "from": run_summary(before),
        "to": run_summary(after),
        "outage": outage,
        # What flags a score move (`drifted`) and a query vector (`embedding_moved`).
        "thresholds": {"score_drift": score_drift, "embedding_changed_below": CHANGED_BELOW},
        "metrics": _changes(before.metrics, after.metrics),
        "cases": changed,
        "unchanged": len(cases) - len(changed),
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
    }
