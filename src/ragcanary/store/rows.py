"""Reports as rows: the runs, results, points and vectors rows of a report, and back."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any

from ragcanary.measure.run_report import RunReport
from ragcanary.store.schema import JSON_ENCODER, NAME_LENGTH, OUTCOME_LENGTH

_ABSENT = "~absent"  # key in results.extra listing the entry keys that were missing


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
    return isinstance(value, str) and len(value) <= NAME_LENGTH and _text_or_none(value)


def _float_or_none(value: Any) -> bool:
    # Only floats: an int in a float column would come back as a float, and a big one inexact.
    # NaN and infinity go to the JSON column, which refuses them.
    return value is None or (isinstance(value, float) and math.isfinite(value))


def _text_or_none(value: Any) -> bool:
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


def _any(value: Any) -> bool:
    return True


# Case-entry key -> (results column, whether a value fits that column), in marshal's order.
_CASE_COLUMNS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "id": ("case_id", _text_or_none),
    "query": ("query", _text_or_none),
    "kind": ("kind", _text_or_none),
    "outcome": ("outcome", _text_or_none),
    "ids": ("ids", _any),
    "scores": ("scores", _any),
    "latency_s": ("latency_s", _float_or_none),
    "error": ("error", _text_or_none),
    "metrics": ("metrics", _any),
}


VECTOR_KEY = "query_vector"  # the case-entry key whose value goes to the vectors table


def vector_row(run_id: str, position: int, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The vectors row of one case entry, or None when it has no vector the table can hold."""
    vector = entry.get(VECTOR_KEY)
    if not isinstance(vector, str) or not vector.isascii() or not vector.isprintable():
        return None
    return {"run_id": run_id, "position": position, "vector": vector}


def case_row(run_id: str, position: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The results row of one case entry; case_entry inverts it exactly."""
    row: dict[str, Any] = {"run_id": run_id, "position": position}
    extra = {key: value for key, value in entry.items() if key not in _CASE_COLUMNS}
    absent = []
    for key, (column, fits) in _CASE_COLUMNS.items():
        row[column] = None
        if key not in entry:
            absent.append(key)
        elif fits(entry[key]):
            row[column] = entry[key]
        else:
            extra[key] = entry[key]
    if absent:
        extra[_ABSENT] = absent
    row["extra"] = extra or None
    return row


def case_entry(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The case entry of a results row, equal to the one case_row was given."""
    extra = dict(row["extra"] or {})
    absent = set(extra.pop(_ABSENT, ()))
    entry = {}
    for key, (column, _fits) in _CASE_COLUMNS.items():
        if key in extra:
            entry[key] = extra.pop(key)
        elif key not in absent:
            entry[key] = row[column]
    entry.update(extra)
    return entry


def point_row(
    run: Mapping[Any, Any], position: int, entry: Mapping[str, Any], verdict: str | None
) -> dict[str, Any]:
    """The points row of one case entry of ``run`` (a runs row): what its history shows,
    with the case's ``verdict`` in that run (``measure.case_verdict``).

    Values of unexpected types (a hand-written report's) are left out; the full report keeps
    them.
    """
    scores = entry.get("scores")
    top = scores[0] if isinstance(scores, list) and scores else None
    ids = entry.get("ids")
    return {
        "suite": run["suite"],
        "case_id": entry["id"],
        "started_at": run["started_at"],
        "run_id": run["run_id"],
        "position": position,
        "target": run["target"],
        "run_outcome": run["outcome"],
        "outcome": _text(entry.get("outcome")),
        "error": _text(entry.get("error")),
        "latency_s": _float(entry.get("latency_s")),
        "top_score": _float(top),
        "ids": _encoded_ids(ids),
        "verdict": verdict,
    }


def _encoded_ids(ids: Any) -> str | None:
    if not isinstance(ids, list):
        return None
    try:
        return encode_ids(ids)
    except (TypeError, ValueError):  # not JSON: the run's results row refuses the same list
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and _text_or_none(value) else None


def _float(value: Any) -> float | None:
    return value if isinstance(value, float) and math.isfinite(value) else None


_ID_MARK = "\x1f"  # ASCII unit separator: written before every id of a points.ids text
_JSON_LIST = json.JSONDecoder()


def encode_ids(ids: list[Any]) -> str:
    """The text points.ids holds for a list of ids; decode_ids gives the list back.

    Each id preceded by a unit separator ("" for no ids): splitting that is ten times faster
    than decoding JSON, which matters for 8,640 points. A list the form cannot hold (an id
    with that character, or text the databases refuse, or something not an id) is JSON.
    """
    if all(isinstance(i, str) for i in ids):
        text = "".join((_ID_MARK, _ID_MARK.join(ids))) if ids else ""
        # One check of the whole text checks every id: as many marks as ids, so none holds one.
        if text.count(_ID_MARK) == len(ids) and _text_or_none(text):
            return text
    return JSON_ENCODER.encode(ids)


def decode_ids(text: str) -> list[Any]:
    """The list of ids encode_ids turned into ``text``."""
    if not text or text[0] == _ID_MARK:
        return text.split(_ID_MARK)[1:]
    ids: list[Any] = _JSON_LIST.raw_decode(text)[0]  # json.loads without its per-call checks
    return ids
