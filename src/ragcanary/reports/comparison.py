"""Several targets compared (``ragcanary compare``): its JSON, Markdown and JUnit XML.

Pure functions of the ``TargetComparison`` that ``measure.target_comparison`` builds; the
JSON keys are written here and nowhere else (docs/report.md, "The comparison JSON").
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ragcanary.measure.target_comparison import Figures, TargetComparison, TargetResult

MARK = "▼"  # significantly lower than the reference, after the correction
_DASH = "\u2013"
_MARKUP = re.compile(r"([\\`*_\[\]<>|#~!])")


def comparison_data(comparison: TargetComparison) -> dict[str, Any]:
    """The comparison as the JSON object ``compare --report`` writes."""
    return {
        "suite": comparison.suite,
        "reference": comparison.reference,
        "correction": comparison.correction,
        "significance": comparison.significance,
        "targets": {t.name: _target(t) for t in comparison.targets},
        "tags": {
            tag: {t.name: _figures(t.tags[tag], t.is_reference) for t in comparison.targets}
            for tag in comparison.tags
        },
    }


def dump_comparison(comparison: TargetComparison) -> str:
    """``comparison_data`` as JSON text (non-finite numbers as null)."""
    return json.dumps(comparison_data(comparison), indent=2, ensure_ascii=False) + "\n"


def _target(target: TargetResult) -> dict[str, Any]:
    out = _figures(target.suite, target.is_reference)
    if not target.is_reference:
        out["worse"] = bool(target.worse)
        out["worse_metrics"] = list(target.worse)
    out["run_id"] = target.run_id
    out["coverage"] = _num(target.coverage)
    out["latency_p50_s"] = _num(target.latency_p50_s)
    out["latency_p95_s"] = _num(target.latency_p95_s)
    return out


def _figures(figures: Figures, is_reference: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"metrics": _numbers(figures.metrics)}
    if is_reference:
        return out
    out["deltas"] = _numbers(figures.deltas)
    out["p_values"] = _numbers(figures.p_values)
    out["p_values_corrected"] = _numbers(figures.p_values_corrected)
    out["significant"] = list(figures.significant)
    return out


def _numbers(values: Mapping[str, float]) -> dict[str, float | None]:
    return {k: _num(v) for k, v in values.items()}


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


# --- shared by the terminal table and the Markdown --------------------------------------


def metric_groups(comparison: TargetComparison) -> list[list[str]]:
    """The metric names in tables of one family each (``hit_rate@1`` … ``hit_rate@10``); a
    family of one metric (``mrr``) joins the table before it."""
    names = dict.fromkeys(m for t in comparison.targets for m in t.suite.metrics)
    groups: list[list[str]] = []
    for name in names:
        family = name.split("@", 1)[0]
        if groups and ("@" not in name or groups[-1][0].split("@", 1)[0] == family):
            groups[-1].append(name)
        else:
            groups.append([name])
    return groups


def cell_lines(figures: Figures, metric: str, is_reference: bool) -> list[str]:
    """One target's cell for ``metric``: the value; for a candidate also its difference to the
    reference and its corrected p-value, the value marked when significant."""
    value = _fixed(figures.metrics.get(metric))
    if is_reference or metric not in figures.metrics:
        return [value]
    mark = f" {MARK}" if metric in figures.significant else ""
    delta = figures.deltas.get(metric)
    p = figures.p_values_corrected.get(metric)
    return [
        value + mark,
        _DASH if delta is None else f"{delta:+.4f}",
        _DASH if p is None else f"p {p:.4f}",
    ]


def legend(comparison: TargetComparison) -> str:
    """What the cells say, the correction named."""
    return (
        f"Each candidate: its value, its difference to {comparison.reference} and the "
        "one-sided paired permutation test's p-value that it is lower, Holm-corrected over "
        f"the {len(comparison.candidates)} candidate(s) per metric; {MARK}: significantly "
        f"lower (corrected p < {comparison.significance:g})."
    )


def verdict_lines(comparison: TargetComparison) -> Iterator[str]:
    """One line per candidate: significantly worse (and on which metrics) or not."""
    for target in comparison.candidates:
        if target.worse:
            yield (
                f"{target.name} is significantly worse than {comparison.reference}: "
                + ", ".join(target.worse)
            )
        else:
            yield f"{target.name} is not significantly worse than {comparison.reference}"


def _fixed(value: float | None) -> str:
    return _DASH if value is None or not math.isfinite(value) else f"{value:.4f}"


def seconds(value: float | None) -> str:
    return _DASH if value is None else f"{value * 1000:.1f} ms"


# --- Markdown -----------------------------------------------------------------------------


def render_comparison_markdown(comparison: TargetComparison) -> str:
    """The comparison as Markdown for a pull request: a headline per candidate, the suite's
    tables (targets as rows), then each tag's in a collapsed section."""
    worse = comparison.worse_targets()
    title = "❌ worse than the reference" if worse else "✅ no candidate significantly worse"
    lines = [
        f"## {title}: ragcanary compare on suite {_code(comparison.suite)}",
        "",
        f"Reference {_code(comparison.reference)} · correction: Holm-Bonferroni",
        "",
        *(f"- {_text(line)}" for line in verdict_lines(comparison)),
        "",
        _overview(comparison),
        "",
        *_scope_tables(comparison, None),
        _text(legend(comparison)),
    ]
    for tag in comparison.tags:
        lines += ["", f"<details><summary>tag {_text(tag)}</summary>", ""]
        lines += [*_scope_tables(comparison, tag), "</details>"]
    return "\n".join(lines) + "\n"


def _overview(comparison: TargetComparison) -> str:
    rows = [["target", "coverage", "latency p50", "latency p95"], ["---", "---:", "---:", "---:"]]
    for t in comparison.targets:
        rows.append(
            [
                _name(t),
                f"{t.coverage:.0%}",
                seconds(t.latency_p50_s),
                seconds(t.latency_p95_s),
            ]
        )
    return _table(rows)


def _scope_tables(comparison: TargetComparison, tag: str | None) -> list[str]:
    out = []
    for group in metric_groups(comparison):
        rows = [["target", *map(_text, group)], ["---", *("---:" for _ in group)]]
        for t in comparison.targets:
            figures = t.suite if tag is None else t.tags[tag]
            cells = ["<br>".join(map(_text, cell_lines(figures, m, t.is_reference))) for m in group]
            rows.append([_name(t), *cells])
        out += [_table(rows), ""]
    return out


def _name(target: TargetResult) -> str:
    return _code(target.name) + (" (reference)" if target.is_reference else "")


def _table(rows: list[list[str]]) -> str:
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def _text(text: str) -> str:
    return _MARKUP.sub(r"\\\1", " ".join(text.splitlines()))


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


# --- JUnit --------------------------------------------------------------------------------


def render_comparison_junit(comparison: TargetComparison) -> str:
    """JUnit XML: a test suite ``ragcanary.compare.SUITE`` with a test case per candidate,
    failed when it is significantly worse than the reference."""
    suite = ET.Element("testsuite", name=f"ragcanary.compare.{comparison.suite}")
    failures = 0
    for target in comparison.candidates:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"ragcanary.compare.{comparison.suite}",
            name=f"{target.name} vs {comparison.reference}",
        )
        if target.worse:
            failures += 1
            failure = ET.SubElement(
                case,
                "failure",
                message=f"significantly worse than {comparison.reference}: "
                + ", ".join(target.worse),
            )
            failure.text = "\n".join(_worse_lines(target))
    suite.set("tests", str(len(comparison.candidates)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="ragcanary")
    for key in ("tests", "failures", "errors"):
        root.set(key, suite.get(key, "0"))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _worse_lines(target: TargetResult) -> Sequence[str]:
    figures = target.suite
    return [
        f"{m}: {figures.metrics.get(m, math.nan):.4f} "
        f"(difference {figures.deltas.get(m, math.nan):+.4f}, "
        f"p {figures.p_values.get(m, math.nan):.4f}, "
        f"Holm-corrected {figures.p_values_corrected.get(m, math.nan):.4f})"
        for m in target.worse
    ]
