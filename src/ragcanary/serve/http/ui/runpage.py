"""The run page's content: metrics against the baseline, the verdict's reasons, the case table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragcanary.measure.cases import Suite
from ragcanary.measure.reasons import FamilyDrop, family_drops
from ragcanary.measure.results import ANSWERED
from ragcanary.reports.report import regressions_of

PAGE_ROWS = 200  # cases per page: 1,000 rows would be a 400 kB page
QUERY_CHARS = 160  # a query is shown up to this long in the table (the case page has it whole)
_METRIC_ORDER = ("hit_rate", "mrr", "ndcg", "recall", "precision", "map")
SORT_KEYS = ("severity", "id", "outcome", "hit", "rr", "rbo", "left", "top", "latency")
# The outcome filter: the states a case can be in besides its query outcome.
STATES = {
    "regressed": "regressed vs baseline",
    "failing": "failed a check",
    "unanswered": "unanswered",
    "changed": "top-k changed",
}
STATE_TEXT = {
    "regressed": "regressed",
    "failing": "check failed",
    "unanswered": "unanswered",
    "changed": "changed",
    "ok": "ok",
}


@dataclass
class MetricLine:
    """One aggregate metric of the run against its baseline."""

    name: str
    current: float | None
    baseline: float | None
    delta: float | None
    p_value: float | None
    ci: tuple[float | None, float | None] | None
    win_tie_loss: Sequence[int] | None
    failed: bool


@dataclass
class CaseLine:
    """One case of the run, as the table shows it."""

    position: int
    id: str
    query: str
    query_cut: bool
    tags: tuple[str, ...]
    kind: str | None
    outcome: str | None
    error: str | None
    hit: float | None
    rr: float | None
    rbo: float | None
    left: int | None
    entered: int | None
    top_score: float | None
    latency_s: float | None
    regressions: list[dict[str, Any]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # messages of failed per-case checks
    drops: list[FamilyDrop] = field(default_factory=list)  # the regressions, one a family

    @property
    def state(self) -> str:
        if self.regressions:
            return "regressed"
        if self.checks:
            return "failing"
        if self.outcome not in ANSWERED:
            return "unanswered"
        if self.left:
            return "changed"
        return "ok"

    @property
    def worst(self) -> float:
        return min((r["current"] - r["baseline"] for r in self.regressions), default=0.0)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _metric_rank(name: str) -> tuple[int, int, str]:
    base, _, k = name.partition("@")
    order = _METRIC_ORDER.index(base) if base in _METRIC_ORDER else len(_METRIC_ORDER)
    return (order, int(k) if k.isdigit() else 0, name)


def metric_lines(report: Mapping[str, Any]) -> list[MetricLine]:
    """Every aggregate metric of ``report`` with its baseline, delta and paired statistics."""
    metrics = report.get("metrics") or {}
    baseline = report.get("baseline") or {}
    deltas = baseline.get("deltas") or {}
    p_values = baseline.get("p_values") or {}
    cis = baseline.get("ci") or {}
    wtl = baseline.get("win_tie_loss") or {}
    failed = {f.get("metric") for f in report.get("failures") or () if f.get("metric")}
    lines = []
    for name in sorted(metrics, key=_metric_rank):
        current, delta = _number(metrics.get(name)), _number(deltas.get(name))
        ci = cis.get(name)
        lines.append(
            MetricLine(
                name=name,
                current=current,
                baseline=current - delta if current is not None and delta is not None else None,
                delta=delta,
                p_value=_number(p_values.get(name)),
                ci=(_number(ci[0]), _number(ci[1]))
                if isinstance(ci, list) and len(ci) == 2
                else None,
                win_tie_loss=wtl.get(name) if isinstance(wtl.get(name), list) else None,
                failed=name in failed,
            )
        )
    return lines


def case_lines(report: Mapping[str, Any], suite: Suite | None, hit_key: str) -> list[CaseLine]:
    """The cases of ``report`` in suite order, with their regressions and failed checks."""
    regressions: dict[str, list[dict[str, Any]]] = {}
    for regression in report.get("regressions") or ():
        regressions.setdefault(str(regression.get("case")), []).append(regression)
    drops = family_drops(regressions_of(report.get("regressions") or ()))
    checks: dict[str, list[str]] = {}
    for failure in report.get("failures") or ():
        if failure.get("case") and failure.get("kind") not in ("drop", "floor"):
            checks.setdefault(str(failure["case"]), []).append(str(failure.get("message")))
    by_id = suite.by_id if suite is not None else {}
    lines = []
    for position, entry in enumerate(report.get("cases") or ()):
        case_id = str(entry.get("id"))
        query = str(entry.get("query") or "")
        metrics = entry.get("metrics") or {}
        versus = entry.get("vs_baseline") or {}
        scores = entry.get("scores") or []
        case = by_id.get(case_id)
        lines.append(
            CaseLine(
                position=position,
                id=case_id,
                query=query[:QUERY_CHARS],
                query_cut=len(query) > QUERY_CHARS,
                tags=case.tags if case is not None else (),
                kind=entry.get("kind"),
                outcome=entry.get("outcome"),
                error=entry.get("error"),
                hit=_number(metrics.get(hit_key)),
                rr=_number(metrics.get("rr")),
                rbo=_number(versus.get("rbo")),
                left=len(versus["left"]) if isinstance(versus.get("left"), list) else None,
                entered=len(versus["entered"]) if isinstance(versus.get("entered"), list) else None,
                top_score=_number(scores[0]) if scores else None,
                latency_s=_number(entry.get("latency_s")),
                regressions=regressions.get(case_id, []),
                checks=checks.get(case_id, []),
                drops=drops.get(case_id, []),
            )
        )
    return lines


_STATE_ORDER = {"regressed": 0, "failing": 1, "unanswered": 2, "changed": 3, "ok": 4}


def _missing_last(value: float | int | None, descending: bool) -> tuple[int, float]:
    if value is None:
        return (1, 0.0)
    return (0, -value if descending else value)


def sort_lines(lines: Sequence[CaseLine], key: str, descending: bool) -> list[CaseLine]:
    """The case lines in the table's order: by severity (regressions first) or one column."""
    if key == "id":
        return sorted(lines, key=lambda c: c.id, reverse=descending)
    if key == "outcome":
        return sorted(lines, key=lambda c: (c.outcome or "", c.position), reverse=descending)
    column = {
        "hit": lambda c: c.hit,
        "rr": lambda c: c.rr,
        "rbo": lambda c: c.rbo,
        "left": lambda c: c.left,
        "top": lambda c: c.top_score,
        "latency": lambda c: c.latency_s,
    }.get(key)
    if column is not None:
        return sorted(lines, key=lambda c: (_missing_last(column(c), descending), c.position))
    return sorted(lines, key=lambda c: (_STATE_ORDER[c.state], c.worst, c.position))


def filter_lines(lines: Sequence[CaseLine], tag: str | None, outcome: str | None) -> list[CaseLine]:
    """The lines with ``tag`` and in ``outcome`` (a state of STATES, or a query outcome)."""
    kept = [c for c in lines if not tag or tag in c.tags]
    if not outcome:
        return kept
    if outcome in STATES:
        return [c for c in kept if c.state == outcome]
    return [c for c in kept if c.outcome == outcome]


def drift_lines(report: Mapping[str, Any]) -> list[tuple[str, float | None, str]]:
    """The run's comparison with its baseline beyond metrics: (label, value, what it means)."""
    baseline = report.get("baseline") or {}
    wanted = (
        ("rank overlap (RBO)", "rank_overlap", "mean rank-biased overlap with the baseline"),
        ("score drift", "score_drift", "mean |Δscore| of ids in both top-k lists"),
        ("drifted share", "score_drifted_ratio", "share of (case, id) pairs over the threshold"),
        ("score shift", "score_shift", "mean signed score change"),
        ("top score Δ", "top_score_delta", "mean change of the top-1 score"),
        ("embedding drift", "embedding_drift", "1 - mean cosine of the query vectors"),
        ("embedding changed", "embedding_changed_ratio", "share of queries whose vector moved"),
    )
    return [
        (label, _number(baseline.get(key)), meaning)
        for label, key, meaning in wanted
        if key in baseline and (baseline.get(key) is not None or key == "rank_overlap")
    ]


def tag_lines(
    report: Mapping[str, Any], hit_key: str
) -> list[tuple[str, float | None, float | None]]:
    """Per tag: Hit@k and MRR of this run."""
    by_tag = report.get("metrics_by_tag") or {}
    return [
        (str(tag), _number(values.get(hit_key)), _number(values.get("mrr")))
        for tag, values in sorted(by_tag.items())
        if isinstance(values, Mapping)
    ]


def outcomes_present(lines: Sequence[CaseLine]) -> list[str]:
    """The query outcomes that occur in the run, for the filter's choices."""
    return sorted({c.outcome for c in lines if c.outcome})


def tags_present(lines: Sequence[CaseLine]) -> list[str]:
    """Every tag of the run's cases, for the filter's choices."""
    return sorted({t for c in lines for t in c.tags})
