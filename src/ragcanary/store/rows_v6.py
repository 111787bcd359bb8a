"""Reports as the rows of schema version 6 (``store.schema_v6``): a case entry as its results
row and its points row, and back. Upgrades read version-6 databases through these."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from ragcanary.store.rows import float_or_none, text_or_none
from ragcanary.store.schema import JSON_ENCODER

_ABSENT = "~absent"  # key in results.extra listing the entry keys that were missing


def _any(value: Any) -> bool:
    return True


# Case-entry key -> (results column, whether a value fits that column), in marshal's order.
_CASE_COLUMNS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "id": ("case_id", text_or_none),
    "query": ("query", text_or_none),
    "kind": ("kind", text_or_none),
    "outcome": ("outcome", text_or_none),
    "ids": ("ids", _any),
    "scores": ("scores", _any),
    "latency_s": ("latency_s", float_or_none),
    "error": ("error", text_or_none),
    "metrics": ("metrics", _any),
}


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
    return value if isinstance(value, str) and text_or_none(value) else None


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
        if text.count(_ID_MARK) == len(ids) and text_or_none(text):
            return text
    return JSON_ENCODER.encode(ids)


def decode_ids(text: str) -> list[Any]:
    """The list of ids encode_ids turned into ``text``."""
    if not text or text[0] == _ID_MARK:
        return text.split(_ID_MARK)[1:]
    ids: list[Any] = _JSON_LIST.raw_decode(text)[0]  # json.loads without its per-call checks
    return ids
