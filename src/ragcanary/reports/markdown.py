"""Rendering a run report as a Markdown summary fit for a pull-request comment."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragcanary.measure.reasons import family_drops
from ragcanary.reports.report import reason_lines, regressions_of, unanswered

_HEADLINES = {
    "ok": "✅ pass",
    "regression": "❌ regression",
    "unavailable": "⚠️ unavailable",
}
# Punctuation that Markdown would read as formatting, links, HTML or table borders.
_MARKUP = re.compile(r"([\\`*_\[\]<>|#~!])")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
_DASH = "\u2013"  # en dash: a value the report does not have


def render_markdown(report: Mapping[str, Any], *, max_cases: int = 10) -> str:
    """Render ``report`` (the report JSON as a dict) as Markdown for a PR comment.

    Sections: a headline with the outcome, the aggregate metrics (with baseline
    deltas, p-values and intervals when a baseline exists), the failures, the
    regressed cases in the report's worst-first order (at most ``max_cases``
    cases), and drift against the baseline.
    """
    baseline: Mapping[str, Any] | None = report.get("baseline")
    sections = [
        _headline(report),
        _metrics_table(report.get("metrics") or {}, baseline),
        _failures(reason_lines(report)),
        _regressions(report.get("regressions") or [], report.get("cases") or [], max_cases),
        _drift(baseline),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _headline(report: Mapping[str, Any]) -> str:
    outcome = str(report.get("outcome", ""))
    title = _HEADLINES.get(outcome, f"❔ {_text(outcome)}")
    suite, target = str(report.get("suite", "")), str(report.get("target", ""))
    facts = [
        f"**Coverage** {_coverage(report)}",
        f"**Duration** {_duration(report.get('duration_s'))}",
    ]
    run_id = report.get("run_id")
    if run_id is not None:
        facts.append(f"**Run** {_code(str(run_id))}")
    baseline = report.get("baseline")
    if baseline and baseline.get("run_id") is not None:
        facts.append(f"**Baseline** {_code(str(baseline['run_id']))}")
    heading = f"## {title}: ragcanary suite {_code(suite)} on {_code(target)}"
    lines = [heading, "", " · ".join(facts)]
    failed = unanswered(report)
    if failed:
        reasons = ", ".join(f"{_text(name)} {n}" for name, n in failed.items())
        lines += ["", f"Unanswered queries: {reasons}"]
    return "\n".join(lines)


def _metrics_table(metrics: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> str:
    if not metrics:
        return "No labelled case was answered, so there are no quality metrics."
    if baseline is None:
        rows = [["metric", "value"], ["---", "---:"]]
        rows += [[_cell(name), _number(value)] for name, value in metrics.items()]
        return _table(rows)
    deltas = baseline.get("deltas") or {}
    p_values = baseline.get("p_values") or {}
    intervals = baseline.get("ci") or {}
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
    regressions: Sequence[Mapping[str, Any]],
    cases: Sequence[Mapping[str, Any]],
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
        for case, drops in family_drops(regressions_of(regressions)).items()
    }
    queries = {str(c.get("id")): str(c.get("query", "")) for c in cases}
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


def _drift(baseline: Mapping[str, Any] | None) -> str:
    if not baseline:
        return ""
    facts = [
        ("Rank overlap (RBO)", _number(baseline.get("rank_overlap"))),
        ("Score drift (mean abs Δ)", _number(baseline.get("score_drift"))),
        ("Drifted (case, id) pairs", _percent(baseline.get("score_drifted_ratio"))),
        ("Top-1 score Δ", _signed(baseline.get("top_score_delta"))),
    ]
    if baseline.get("embedding_drift") is not None:  # a target searched by vector
        facts.append(("Embedding drift (1 - mean cosine)", _number(baseline["embedding_drift"])))
        facts.append(("Query vectors moved", _percent(baseline.get("embedding_changed_ratio"))))
    sizes = baseline.get("embedding_dimensions")
    if isinstance(sizes, Mapping):
        facts.append(("Embedding dimensions", f"{sizes.get('baseline')} → {sizes.get('current')}"))
    return "\n".join(["### Drift vs baseline", "", *(f"- {k}: {v}" for k, v in facts)])


def _coverage(report: Mapping[str, Any]) -> str:
    text = _percent(report.get("coverage"))
    counts = report.get("counts") or {}
    if isinstance(counts.get("answered"), int) and isinstance(counts.get("cases"), int):
        text += f" ({counts['answered']}/{counts['cases']} answered)"
    return text


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
