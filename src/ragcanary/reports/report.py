"""Report files (docs/report.md): writing runs' reports as JSON text and reading them back.

The report's shape is ``measure.run_report.RunReport``; its JSON form is
``measure.report_json``. This module adds the file: one report as its object, several as an
array, and the errors a person reads when a file is not a report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.measure.reasons import reasons, unjudged_note
from ragcanary.measure.report_json import marshal, missing_keys, unmarshal
from ragcanary.measure.results import ANSWERED
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.indented import dumps_indented


def failure_kinds(report: RunReport) -> dict[str, dict[str, Any]]:
    """Unanswered queries by outcome: how many, and the first error of each kind (in suite order).

    Sixteen near-identical errors are one entry with a count, not sixteen lines.
    """
    kinds: dict[str, dict[str, Any]] = {}
    for case in report.cases:
        if not case.error or case.outcome in ANSWERED:
            continue
        entry = kinds.setdefault(case.outcome, {"count": 0, "first": case.error, "case": case.id})
        entry["count"] += 1
    return kinds


def reason_lines(report: RunReport) -> list[str]:
    """Why the run failed, as people read it (``measure.reasons``): floors first, one line a
    metric family, whether unlabelled documents may explain them, then the canaries that
    broke."""
    deltas = report.baseline.deltas if report.baseline is not None else {}
    note = unjudged_note(report.failures, report.metrics, deltas)
    return reasons(report.failures, () if note is None else (note,))


def dump_text(reports: Sequence[RunReport]) -> str:
    """One report as its JSON object (docs/report.md), several as a JSON array of them."""
    objects = [marshal(report) for report in reports]
    data: Any = objects[0] if len(objects) == 1 else objects
    return dumps_indented(data) + "\n"


def load_reports(path: Path) -> list[RunReport]:
    """Read a report file written by ``--report`` (one object or an array of them)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such report file; pass a file written by --report") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable report JSON ({exc})") from None
    objects = data if isinstance(data, list) else [data]
    for i, report in enumerate(objects):
        where = f"{path}" if len(objects) == 1 else f"{path} [{i}]"
        if not isinstance(report, dict):
            raise UsageError(f"{where}: a report must be a JSON object")
        for key in missing_keys(report):
            if key in report:
                raise UsageError(f"{where}: {key!r} must be a list")
            raise UsageError(f"{where}: missing {key!r}; pass a file written by --report")
    return [unmarshal(report) for report in objects]
