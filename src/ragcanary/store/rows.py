"""Reports as rows: the runs, results, points and vectors rows of a report, and back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from ragcanary.measure.run_report import RunReport
from ragcanary.store.schema import JSON_ENCODER, NAME_LENGTH, OUTCOME_LENGTH


def run_row(report: RunReport, data: Mapping[str, Any]) -> dict[str, Any]:
    """The runs row of ``report`` (``data``: its JSON object, ``marshal``'s), after checking
    what the columns and queries rely on."""
    where = f"report {report.run_id!r}" if report.run_id else "a report"
    for key, value in (
        ("run_id", report.run_id),
        ("suite", report.suite),
        ("target", report.target),
        ("outcome", report.outcome),
    ):
        if not value:
            raise ValueError(f"{where} has no {key} string")
        if key != "outcome" and not _name(value):
            raise ValueError(
                f"{where}: {key} is not plain text of {NAME_LENGTH} characters or less"
            )
    if len(report.outcome) > OUTCOME_LENGTH:
        raise ValueError(f"{where} has an outcome longer than {OUTCOME_LENGTH} characters")
    if not all(_name(c.id) for c in report.cases):
        raise ValueError(
            f"{where}: every case needs an id of plain text of {NAME_LENGTH} characters or less"
        )
    head = {key: value for key, value in data.items() if key != "cases"}
    try:
        JSON_ENCODER.encode(head)  # the cases are checked as their columns encode them
    except (TypeError, ValueError) as error:
        raise not_plain_json(where, error) from None
    started_at = report.started_at
    return {
        "run_id": report.run_id,
        "suite": report.suite,
        "target": report.target,
        # A report without an offset is taken as UTC, the daemon's clock.
        "started_at": started_at if started_at.tzinfo else started_at.replace(tzinfo=UTC),
        # marshal's numbers: None where not finite, as in the JSON the report is read from.
        "duration_s": data["duration_s"],
        "outcome": report.outcome,
        "coverage": data["coverage"],
        "report": head,
    }


def not_plain_json(where: str, error: BaseException) -> ValueError:
    """The error for a report value that JSON cannot hold: NaN, infinity, another object."""
    return ValueError(f"{where} is not plain JSON ({error}); NaN and objects cannot be stored")


def _name(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= NAME_LENGTH and text_or_none(value)


def float_or_none(value: Any) -> bool:
    # Only floats: an int in a float column would come back as a float, and a big one inexact.
    # NaN and infinity go to the JSON column, which refuses them.
    return value is None or (isinstance(value, float) and math.isfinite(value))


def text_or_none(value: Any) -> bool:
    # PostgreSQL text cannot hold NUL, and neither driver can encode a lone surrogate;
    # such strings go to the JSON column, which escapes them.
    if value is None:
        return True
    if not isinstance(value, str) or "\x00" in value:
        return False
    if value.isascii():  # most text; it needs no trial encoding
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


VECTOR_KEY = "query_vector"  # the case-entry key whose value goes to the vectors table


def vector_row(run_id: str, position: int, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The vectors row of one case entry, or None when it has no vector the table can hold."""
    vector = entry.get(VECTOR_KEY)
    if not isinstance(vector, str) or not vector.isascii() or not vector.isprintable():
        return None
    return {"run_id": run_id, "position": position, "vector": vector}
