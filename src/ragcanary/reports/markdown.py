"""Rendering a run report as a Markdown summary fit for a pull-request comment."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ragcanary.measure.reasons import family_drops
from ragcanary.measure.run_report import BaselineComparison, CaseEntry, Numbers, RunReport
from ragcanary.measure.verdict import Regression
from ragcanary.reports.gate import GateResult
from ragcanary.reports.report import reason_lines

_HEADLINES = {
    "ok": "✅ pass",
    "regression": "❌ regression",
    "unavailable": "⚠️ unavailable",
}
# Punctuation that Markdown would read as formatting, links, HTML or table borders.
_MARKUP = re.compile(r"([\\`*_\[\]<>|#~!])")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
_DASH = "\u2013"  # en dash: a value the report does not have


def render_markdown(report: RunReport, *, max_cases: int = 10) -> str:
    """Render ``report`` as Markdown for a PR comment.

    Sections: a headline with the outcome, the aggregate metrics (with baseline
    deltas, p-values and intervals when a baseline exists), the failures, the
    regressed cases in the report's worst-first order (at most ``max_cases``
    cases), and drift against the baseline.
    """
    baseline = report.baseline
    sections = [
        _headline(report),
        _metrics_table(report.metrics, baseline),
        _failures(reason_lines(report)),
        _regressions(report.regressions, report.cases, max_cases),
        _drift(baseline),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _headline(report: RunReport) -> str:
    outcome = report.outcome
    title = _HEADLINES.get(outcome, f"❔ {_text(outcome)}")
    facts = [
        f"**Coverage** {_coverage(report)}",
        f"**Duration** {_duration(report.duration_s)}",
        f"**Run** {_code(report.run_id)}",
    ]
    if report.baseline is not None:
        facts.append(f"**Baseline** {_code(report.baseline.run_id)}")
    heading = f"## {title}: ragcanary suite {_code(report.suite)} on {_code(report.target)}"
    lines = [heading, "", " · ".join(facts)]
    if report.diagnosis is not None:  # which layer broke, before any metric
        diagnosis = report.diagnosis
        lines += ["", f"**Cause** {_code(diagnosis.cause)}: {_text(diagnosis.summary)}"]
    failed = report.unanswered()
    if failed:
        reasons = ", ".join(f"{_text(name)} {n}" for name, n in failed.items())
        lines += ["", f"Unanswered queries: {reasons}"]
    return "\n".join(lines)


def _metrics_table(metrics: Numbers, baseline: BaselineComparison | None) -> str:
    if not metrics:
        return "No labelled case was answered, so there are no quality metrics."
    if baseline is None:
        rows = [["metric", "value"], ["---", "---:"]]
        rows += [[_cell(name), _number(value)] for name, value in metrics.items()]
        return _table(rows)
    deltas, p_values, intervals = baseline.deltas, baseline.p_values, baseline.ci
    rows = [
        ["metric", "value", "Δ vs baseline", "p-value", "CI of Δ"],
        ["---", "---:", "---:", "---:", "---:"],
    ]
    for name, value in metrics.items():
        rows.append(
            [
                _cell(name),
                _number(value),
                _signed(deltas.get(name)),
                _p_value(p_values.get(name)),
                _interval(intervals.get(name)),
            ]
        )
    return _table(rows)


def _failures(reasons: Sequence[str]) -> str:
    if not reasons:
        return ""
    return "\n".join(["### Failures", "", *(f"- {_text(reason)}" for reason in reasons)])


def _regressions(
    regressions: Sequence[Regression],
    cases: Sequence[CaseEntry],
    max_cases: int,
) -> str:
    if not regressions:
        return ""
    # One row per case, keeping the report's worst-first order of first appearance, and in it
    # one change per metric family: its worst cut-off, naming the others that dropped.
    changes = {
        case: [
            f"{_text(d.worst.metric)} {_number(d.worst.baseline)} → "
            f"{_number(d.worst.current)}{_text(d.also_text)}"
            for d in drops
        ]
        for case, drops in family_drops(regressions).items()
    }
    queries = {c.id: c.query for c in cases}
    shown = list(changes.items())[: max(max_cases, 0)]
    rows = [["case", "query", "change"], ["---", "---", "---"]]
    rows += [
        [
            _code(case_id, in_table=True),
            _code(queries[case_id], in_table=True) if case_id in queries else _DASH,
            ", ".join(ch),
        ]
        for case_id, ch in shown
    ]
    lines = ["### Regressed cases", "", _table(rows)]
    hidden = len(changes) - len(shown)
    if hidden > 0:
        lines += ["", f"…and {hidden} more"]
    return "\n".join(lines)


def _drift(baseline: BaselineComparison | None) -> str:
    if baseline is None:
        return ""
    facts = [
        ("Rank overlap (RBO)", _number(baseline.rank_overlap)),
        ("Score drift (mean abs Δ)", _number(baseline.score_drift)),
        ("Drifted (case, id) pairs", _percent(baseline.score_drifted_ratio)),
        ("Top-1 score Δ", _signed(baseline.top_score_delta)),
    ]
    if baseline.embedding_drift is not None:  # a target searched by vector
        facts.append(("Embedding drift (1 - mean cosine)", _number(baseline.embedding_drift)))
        facts.append(("Query vectors moved", _percent(baseline.embedding_changed_ratio)))
    sizes = baseline.embedding_dimensions
    if sizes is not None:
        facts.append(("Embedding dimensions", f"{sizes[0]} → {sizes[1]}"))
    return "\n".join(["### Drift vs baseline", "", *(f"- {k}: {v}" for k, v in facts)])


def _coverage(report: RunReport) -> str:
    counts = report.counts
    if not counts.cases:  # a hand-written report that gives no counts: say nothing of them
        return _percent(report.coverage)
    return f"{_percent(report.coverage)} ({counts.answered}/{counts.cases} answered)"


def _table(rows: list[list[str]]) -> str:
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _DASH if value is None else _cell(str(value))
    if isinstance(value, float) and math.isnan(value):  # null in the report: not a number
        return _DASH
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _signed(value: Any) -> str:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:+.3f}"
    return _number(value)


def _p_value(value: Any) -> str:
    if isinstance(value, float | int) and not isinstance(value, bool) and value < 0.001:
        return "< 0.001"
    return _number(value)


def _percent(value: Any) -> str:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{100 * value:.1f}%"
    return _number(value)


def _interval(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return f"[{_signed(value[0])}, {_signed(value[1])}]"
    return _number(value)


def _duration(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return _DASH
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s"


def _text(text: str) -> str:
    """Plain text on one line, with Markdown punctuation escaped so it renders literally."""
    return _MARKUP.sub(r"\\\1", _LINE_BREAKS.sub(" ", text))


def _cell(text: str) -> str:
    """Text for a table cell: escaped, and its line breaks kept as <br>."""
    return "<br>".join(_text(part) for part in _LINE_BREAKS.split(text))


def _code(text: str, *, in_table: bool = False) -> str:
    """An inline code span that holds ``text`` verbatim on one line.

    Code spans keep ids and queries literal and stop @mentions and #references
    from notifying anyone; inside a table GFM still needs ``|`` escaped (a
    backslash right before a pipe cannot be kept verbatim there, a GFM limit).
    """
    if not text:
        return _DASH
    flat = _LINE_BREAKS.sub(" ", text)
    if in_table:
        flat = flat.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}"


_GATE_HEADLINES = {
    "ok": "✅ not worse",
    "regression": "❌ worse",
    "unavailable": "⚠️ unavailable",
    "config": "❌ config error",
}


def render_gate_markdown(result: GateResult) -> str:
    """`ragcanary gate --markdown`: the gate's verdict and the cause of the difference, then
    the candidate's run against the stable one as ``render_markdown`` shows a run."""
    stable, candidate = result.stable, result.candidate
    lines = [
        f"# {_GATE_HEADLINES[result.verdict]}: ragcanary gate of {_code(candidate.target)} "
        f"against {_code(stable.target)} on suite {_code(result.suite)}",
        "",
        f"**Verdict** {_code(result.verdict)} · **Exit** {result.exit_code}",
    ]
    for run in result.unavailable():
        lines += ["", f"{_code(run.target)} answered too few canaries: {_coverage(run)}."]
    return "\n".join(lines) + "\n\n" + render_markdown(candidate)
