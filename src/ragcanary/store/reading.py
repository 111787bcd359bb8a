"""Reading runs back from their shared values (schema version 7): a run's head and case
entries, one canary's entries in a few runs, and what a history shows of a ranking."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from ragcanary.measure.case_verdict import CaseVerdict
from ragcanary.store.engine import among
from ragcanary.store.errors import StorageError
from ragcanary.store.rows import text_or_none
from ragcanary.store.schema import answers, cases, rankings, run_parts, runs
from ragcanary.store.shared import BATCH, latency_of, shared_values, verdict_of, with_latency

HEAD_COLUMNS = (runs.c.run_id, runs.c.report, runs.c.parts_key, runs.c.metrics_key)
RUN_COLUMNS = (*HEAD_COLUMNS, runs.c.run_key, runs.c.order_key)  # a whole report's


def heads(conn: Connection, rows: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The heads (reports but their cases) of runs rows of HEAD_COLUMNS, by run_id: runs.report
    and its shared parts, each part read once."""
    keys = [key for row in rows for key in (row.parts_key, row.metrics_key) if key is not None]
    parts = shared_values(conn, run_parts, keys)
    found = {}
    for row in rows:
        head = dict(row.report)
        if row.metrics_key is not None:
            head["metrics"] = parts[row.metrics_key]
        found[row.run_id] = {**head, **parts.get(row.parts_key, {})}
    return found


def answers_of(conn: Connection, run: Any) -> list[tuple[float | None, int]]:
    """The latency and ranking number of each case of a runs row of RUN_COLUMNS, in report
    order (``shared.with_latency`` of the two is the case's entry)."""
    if run.order_key is None:
        return []
    order: list[int] = shared_values(conn, run_parts, [run.order_key])[run.order_key]
    found: dict[int, tuple[float | None, int]] = {}
    for start in range(0, len(order), BATCH):
        query = select(
            answers.c.case_key, answers.c.latency_us, answers.c.latency_s, answers.c.ranking_key
        ).where(
            answers.c.run_key == run.run_key,
            among(conn, answers.c.case_key, order[start : start + BATCH]),
        )
        found.update(
            {case: (latency_of(us, s), ranking) for case, us, s, ranking in conn.execute(query)}
        )
    if len(found) != len(order):
        raise StorageError(
            f"run {run.run_id!r} has {len(found)} of its {len(order)} answers stored"
        )
    return [found[case] for case in order]


def case_entries(
    conn: Connection, run_ids: Iterable[str], case_id: str
) -> dict[str, dict[str, Any]]:
    """The entry of case ``case_id`` in each of the runs ``run_ids`` that has it."""
    wanted = sorted(set(run_ids))
    found: dict[str, tuple[float | None, int]] = {}
    for start in range(0, len(wanted), BATCH):
        query = (
            select(runs.c.run_id, answers.c.latency_us, answers.c.latency_s, answers.c.ranking_key)
            .join(runs, runs.c.run_key == answers.c.run_key)
            .join(cases, cases.c.case_key == answers.c.case_key)
            .where(
                cases.c.case_id == case_id,
                among(conn, runs.c.run_id, wanted[start : start + BATCH]),
            )
        )
        found.update(
            {run: (latency_of(us, s), ranking) for run, us, s, ranking in conn.execute(query)}
        )
    stored = shared_values(conn, rankings, (ranking for _latency, ranking in found.values()))
    return {
        run_id: with_latency(stored[ranking], latency)
        for run_id, (latency, ranking) in found.items()
    }


def returned_ids(conn: Connection, suite: str, run_ids: Sequence[str]) -> dict[str, set[str]]:
    """Every id any case of each of ``run_ids`` returned, by run id (Store.returned_by)."""
    by_run: dict[str, set[int]] = {}
    for start in range(0, len(run_ids), BATCH):
        query = (
            select(runs.c.run_id, answers.c.ranking_key)
            .join(cases, cases.c.suite == runs.c.suite)
            .join(
                answers,
                (answers.c.case_key == cases.c.case_key) & (answers.c.run_key == runs.c.run_key),
            )
            .where(
                runs.c.suite == suite, among(conn, runs.c.run_id, run_ids[start : start + BATCH])
            )
        )
        for run_id, ranking in conn.execute(query):
            by_run.setdefault(run_id, set()).add(ranking)
    stored = shared_values(conn, rankings, (r for keys in by_run.values() for r in keys))
    returned: dict[str, set[str]] = {}
    for run_id, keys in by_run.items():
        for key in keys:
            ids = stored[key].get("ids")
            if isinstance(ids, list):
                returned.setdefault(run_id, set()).update(str(i) for i in ids)
    return returned


def history_view(ranking: Mapping[str, Any]) -> tuple[Any, Any, Any, Any, CaseVerdict, Any]:
    """What a history shows of a ranking: its outcome, error, top score and ids (values of
    unexpected types, a hand-written report's, shown as None), the verdict of its outcome in
    a run that named it nowhere (``shared.verdict_of`` of no code), and the latency it holds
    itself (``shared.split_latency``: one the answers row could not keep exactly)."""
    scores = ranking.get("scores")
    top = scores[0] if isinstance(scores, list) and scores else None
    ids = ranking.get("ids")
    latency = ranking.get("latency_s")
    return (
        _text(ranking.get("outcome")),
        _text(ranking.get("error")),
        _finite(top),
        ids if isinstance(ids, list) else None,
        verdict_of(None, ranking.get("outcome")),
        _finite(latency),
    )


def _finite(value: Any) -> float | None:
    return value if isinstance(value, float) and math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and text_or_none(value) else None
