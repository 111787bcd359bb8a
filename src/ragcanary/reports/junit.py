"""Rendering a run report as JUnit XML, the test-result format CI systems display."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from ragcanary.measure.reasons import FamilyDrop, family_drops, reasons
from ragcanary.measure.run_report import CaseEntry, RunReport
from ragcanary.measure.verdict import Failure

# Outcomes where the target did answer; anything else leaves the canary unanswered.
_ANSWERED = frozenset({"ok", "empty"})
# Characters XML 1.0 cannot carry at all, not even as character references.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'


def render_junit(report: RunReport) -> str:
    """Render ``report`` as a JUnit XML document."""
    return render_junit_many([report])


def render_junit_many(reports: Sequence[RunReport]) -> str:
    """One JUnit XML document with a ``<testsuite>`` per report (one per suite and target)."""
    suites = [_testsuite(report) for report in reports]
    root = ET.Element("testsuites", name="ragcanary")
    total_time = sum(float(suite.get("time", "0")) for suite in suites)
    root.set("time", f"{total_time:.3f}")
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(suite.get(key, "0")) for suite in suites)))
    root.extend(suites)
    ET.indent(root)
    return _DECLARATION + ET.tostring(root, encoding="unicode") + "\n"


def _testsuite(report: RunReport) -> ET.Element:
    """The ``<testsuite>`` of one report.

    One ``<testsuite>`` named ``ragcanary.<suite>.<target>`` holds a ``<testcase>``
    per canary (a ``<failure>`` when it regressed or broke its own limit, an
    ``<error>`` when it went unanswered) and a last testcase ``run`` carrying the
    run-level failures, or an ``<error>`` when the target was unavailable.
    """
    name = f"ragcanary.{report.suite}.{report.target}"
    known = {case.id for case in report.cases}
    per_case: dict[str, list[str]] = {}
    kinds: dict[str, list[str]] = {}
    # One message per metric family that dropped (its worst cut-off), not one per metric and k.
    drops = family_drops(report.regressions)
    for case_id, family in drops.items():
        per_case.setdefault(case_id, []).extend(map(_drop_message, family))
        _add_kind(kinds, case_id, "regression")
    run_failures: list[Failure] = []
    for failure in report.failures:
        if failure.case is not None and failure.case in known:
            per_case.setdefault(failure.case, []).append(failure.message)
            _add_kind(kinds, failure.case, failure.kind)
        else:
            run_failures.append(failure)

    suite = ET.Element("testsuite", name=_clean(name))
    suite.set("timestamp", _clean(report.started_at.isoformat()))
    suite.set("time", _seconds(report.duration_s))
    suite.append(_properties(report))
    for case in report.cases:
        suite.append(_case_element(name, case, per_case.get(case.id, []), kinds.get(case.id, [])))
    suite.append(_run_element(name, report, run_failures))

    testcases = suite.findall("testcase")
    counts = {
        "tests": len(testcases),
        "failures": sum(tc.find("failure") is not None for tc in testcases),
        "errors": sum(tc.find("error") is not None for tc in testcases),
        "skipped": 0,
    }
    for key, value in counts.items():
        suite.set(key, str(value))
    return suite


def _case_element(
    classname: str, case: CaseEntry, messages: list[str], kinds: list[str]
) -> ET.Element:
    element = ET.Element(
        "testcase",
        classname=_clean(classname),
        name=_clean(case.id),
        time=_seconds(case.latency_s),
    )
    outcome = case.outcome or "ok"
    details = _case_details(case)
    if outcome not in _ANSWERED:
        reason = case.error or outcome
        # An unanswered canary has no quality verdict: the error is the whole story.
        body = "\n".join([reason, *messages, details])
        _child(element, "error", message=reason, kind=outcome, text=body)
    elif messages:
        body = "\n".join([*messages, details])
        _child(element, "failure", message="; ".join(messages), kind=",".join(kinds), text=body)
    return element


def _run_element(classname: str, report: RunReport, failures: list[Failure]) -> ET.Element:
    element = ET.Element("testcase", classname=_clean(classname), name="run", time="0.000")
    messages = reasons(failures)
    kinds = ",".join(dict.fromkeys(f.kind for f in failures))
    summary = _run_summary(report)
    if report.outcome == "unavailable":
        message = "; ".join(messages) or "the target was unavailable"
        _child(element, "error", message=message, kind="unavailable", text=f"{message}\n{summary}")
    elif messages:
        body = "\n".join([*messages, summary])
        _child(element, "failure", message="; ".join(messages), kind=kinds, text=body)
    return element


def _properties(report: RunReport) -> ET.Element:
    properties = ET.Element("properties")
    values = {
        "run_id": report.run_id,
        "outcome": report.outcome,
        "coverage": report.coverage,
        "baseline_run_id": report.baseline.run_id if report.baseline else None,
    }
    for key, value in values.items():
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=_clean(str(value)))
    return properties


def _child(parent: ET.Element, tag: str, *, message: str, kind: str, text: str) -> None:
    child = ET.SubElement(parent, tag, message=_clean(message), type=_clean(kind))
    child.text = _clean(text)


def _case_details(case: CaseEntry) -> str:
    lines = [f"query: {case.query}"]
    ids, scores = case.ids, case.scores
    returned = [
        f"{doc} ({_number(scores[i])})" if i < len(scores) and scores[i] is not None else str(doc)
        for i, doc in enumerate(ids)
    ]
    lines.append(f"returned: {', '.join(returned) if returned else '(nothing)'}")
    metrics = case.metrics
    if metrics:
        lines.append("metrics: " + ", ".join(f"{k}={_number(v)}" for k, v in metrics.items()))
    return "\n".join(lines)


def _run_summary(report: RunReport) -> str:
    metrics = report.metrics
    lines = [f"coverage: {_number(report.coverage)}"]
    if metrics:
        lines.append("metrics: " + ", ".join(f"{k}={_number(v)}" for k, v in metrics.items()))
    return "\n".join(lines)


def _drop_message(drop: FamilyDrop) -> str:
    worst = drop.worst
    return f"{worst.metric} {_number(worst.baseline)} -> {_number(worst.current)}{drop.also_text}"


def _add_kind(kinds: dict[str, list[str]], case_id: str, kind: str) -> None:
    seen = kinds.setdefault(case_id, [])
    if kind not in seen:
        seen.append(kind)


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _seconds(value: Any) -> str:
    return f"{float(value):.3f}" if isinstance(value, int | float) else "0.000"


def _clean(text: str) -> str:
    """Replace what XML 1.0 cannot hold (control characters, lone surrogates) with U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)
