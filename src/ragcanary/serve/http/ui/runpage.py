"""The run page's content: metrics against the baseline, the verdict's reasons, the case table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ragcanary.measure.cases import Suite
from ragcanary.measure.reasons import FamilyDrop, family_drops
from ragcanary.measure.results import ANSWERED
from ragcanary.measure.run_report import RunReport
from ragcanary.measure.verdict import Regression

PAGE_ROWS = 200  # cases per page: 1,000 rows would be a 400 kB page
QUERY_CHARS = 160  # a query is shown up to this long in the table (the case page has it whole)
_METRIC_ORDER = ("hit_rate", "mrr", "ndcg", "recall", "precision", "map", "bpref", "judged")
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
    regressions: list[Regression] = field(default_factory=list)
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
        return min((r.current - r.baseline for r in self.regressions), default=0.0)


def _metric_rank(name: str) -> tuple[int, int, str]:
    base, _, k = name.partition("@")
    order = _METRIC_ORDER.index(base) if base in _METRIC_ORDER else len(_METRIC_ORDER)
    return (order, int(k) if k.isdigit() else 0, name)


def metric_lines(report: RunReport) -> list[MetricLine]:
    """Every aggregate metric of ``report`` with its baseline, delta and paired statistics."""
    baseline = report.baseline
    deltas = baseline.deltas if baseline else {}
    p_values = baseline.p_values if baseline else {}
    cis = baseline.ci if baseline else {}
    wtl = baseline.win_tie_loss if baseline else {}
    failed = {f.metric for f in report.failures if f.metric}
    lines = []
    for name in sorted(report.metrics, key=_metric_rank):
        current, delta = report.metrics[name], deltas.get(name)
        lines.append(
            MetricLine(
                name=name,
                current=current,
                baseline=current - delta if current is not None and delta is not None else None,
                delta=delta,
                p_value=p_values.get(name),
                ci=cis.get(name),
                win_tie_loss=wtl.get(name),
                failed=name in failed,
            )
        )
    return lines


def case_lines(report: RunReport, suite: Suite | None, hit_key: str) -> list[CaseLine]:
    """The cases of ``report`` in suite order, with their regressions and failed checks."""
    regressions: dict[str, list[Regression]] = {}
    for regression in report.regressions:
        regressions.setdefault(regression.case, []).append(regression)
    drops = family_drops(report.regressions)
    checks: dict[str, list[str]] = {}
    for failure in report.failures:
        if failure.case and failure.kind not in ("drop", "floor"):
            checks.setdefault(failure.case, []).append(failure.message)
    by_id = suite.by_id if suite is not None else {}
    lines = []
    for position, entry in enumerate(report.cases):
        versus = entry.vs_baseline
        case = by_id.get(entry.id)
        lines.append(
            CaseLine(
                position=position,
                id=entry.id,
                query=entry.query[:QUERY_CHARS],
                query_cut=len(entry.query) > QUERY_CHARS,
                tags=case.tags if case is not None else (),
                kind=entry.kind,
                outcome=entry.outcome,
                error=entry.error,
                hit=entry.metrics.get(hit_key),
                rr=entry.metrics.get("rr"),
                rbo=versus.rbo if versus else None,
                left=len(versus.left) if versus else None,
                entered=len(versus.entered) if versus else None,
                top_score=entry.scores[0] if entry.scores else None,
                latency_s=entry.latency_s,
                regressions=regressions.get(entry.id, []),
                checks=checks.get(entry.id, []),
                drops=drops.get(entry.id, []),
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


def drift_lines(report: RunReport) -> list[tuple[str, float | None, str]]:
    """The run's comparison with its baseline beyond metrics: (label, value, what it means)."""
    baseline = report.baseline
    if baseline is None:
        return []
    wanted = (
        ("rank overlap (RBO)", baseline.rank_overlap, "mean rank-biased overlap with the baseline"),
        ("score drift", baseline.score_drift, "mean |Δscore| of ids in both top-k lists"),
        (
            "drifted share",
            baseline.score_drifted_ratio,
            "share of (case, id) pairs over the threshold",
        ),
        ("score shift", baseline.score_shift, "mean signed score change"),
        ("top score Δ", baseline.top_score_delta, "mean change of the top-1 score"),
        ("embedding drift", baseline.embedding_drift, "1 - mean cosine of the query vectors"),
        (
            "embedding changed",
            baseline.embedding_changed_ratio,
            "share of queries whose vector moved",
        ),
    )
    return [
        (label, value, meaning)
        for label, value, meaning in wanted
        if value is not None or label == "rank overlap (RBO)"
    ]


def tag_lines(report: RunReport, hit_key: str) -> list[tuple[str, float | None, float | None]]:
    """Per tag: Hit@k and MRR of this run."""
    return [
        (tag, values.get(hit_key), values.get("mrr"))
        for tag, values in sorted(report.metrics_by_tag.items())
    ]


def outcomes_present(lines: Sequence[CaseLine]) -> list[str]:
    """The query outcomes that occur in the run, for the filter's choices."""
    return sorted({c.outcome for c in lines if c.outcome})


def tags_present(lines: Sequence[CaseLine]) -> list[str]:
    """Every tag of the run's cases, for the filter's choices."""
    return sorted({t for c in lines for t in c.tags})
