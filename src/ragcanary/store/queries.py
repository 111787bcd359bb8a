"""Statements the store's methods share: run summaries, a canary's history, stale vectors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy
from sqlalchemy import Connection, and_, delete, func, select

from ragcanary.store.errors import StorageError
from ragcanary.store.schema import answers, cases, run_parts, runs, vectors
from ragcanary.store.schema import baselines as baselines_table
from ragcanary.store.shared import shared_values


def forget_vectors(conn: Connection, suite: str, target: str) -> None:
    """Delete the pair's query vectors but the pinned baseline's and the newest run's."""
    pair = and_(runs.c.suite == suite, runs.c.target == target)
    with_vectors = runs.c.run_id.in_(select(vectors.c.run_id))
    newest = (
        select(runs.c.run_id)
        .where(pair, with_vectors)
        .order_by(runs.c.started_at.desc())
        .limit(1)
        .scalar_subquery()
    )
    pinned = select(baselines_table.c.run_id).where(
        baselines_table.c.suite == suite, baselines_table.c.target == target
    )
    stale = (
        select(vectors.c.run_id)
        .join(runs, runs.c.run_id == vectors.c.run_id)
        .where(pair, vectors.c.run_id != newest, vectors.c.run_id.not_in(pinned))
    )
    conn.execute(delete(vectors).where(vectors.c.run_id.in_(stale)))


def aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None:
        raise StorageError(f"{name}={moment.isoformat()} has no timezone; pass an aware datetime")
    return moment


def history_query(
    suite: str, case_id: str, target: str | None = None, since: datetime | None = None
) -> sqlalchemy.Select[Any]:
    """The SELECT behind ``Store.case_history``: one range of the answers table's key (the
    case's), each answer joined to its run by number, in the order of the runs' numbers."""
    case_key = (
        select(cases.c.case_key)
        .where(cases.c.suite == suite, cases.c.case_id == case_id)
        .scalar_subquery()
    )
    query = (
        select(
            runs.c.run_id,
            runs.c.started_at,
            runs.c.target,
            runs.c.outcome,
            answers.c.latency_us,
            answers.c.latency_s,
            answers.c.ranking_key,
            answers.c.verdict,
        )
        .join(runs, runs.c.run_key == answers.c.run_key)
        .where(answers.c.case_key == case_key)
    )
    if target is not None:
        query = query.where(runs.c.target == target)
    if since is not None:
        since = aware(since, "since")
        # Every run that began since has a number at least the least of theirs: the answers
        # read are one stretch of the case's range, not all of it (runs are numbered as they
        # are stored, so a run stored late is in the stretch too).
        first = select(func.min(runs.c.run_key)).where(runs.c.started_at >= since)
        query = query.where(
            runs.c.started_at >= since, answers.c.run_key >= first.scalar_subquery()
        )
    # In the key's order, which reading it costs nothing; Store.case_history puts the rows in
    # time order (they mostly are already: runs are numbered as they are stored). Sorting them
    # here made SQLite build a temporary B-tree, two thirds of the query's time.
    return query.order_by(answers.c.run_key)


def summaries() -> sqlalchemy.Select[Any]:
    return select(
        runs.c.run_id,
        runs.c.suite,
        runs.c.target,
        runs.c.started_at,
        runs.c.duration_s,
        runs.c.outcome,
        runs.c.coverage,
        # The database extracts the object a summary shows: a report with a thousand cases
        # is hundreds of kB that a list of fifty runs need not read or decode.
        runs.c.metrics_key,
        runs.c.parts_key,
    ).order_by(runs.c.started_at.desc(), runs.c.run_id.desc())


def summarised(conn: Connection, rows: Sequence[Any]) -> list[dict[str, Any]]:
    """The summaries of ``summaries()``'s rows, with the deltas of their baseline comparison
    (read from the shared parts, each of which many runs share)."""
    keys = [key for row in rows for key in (row.parts_key, row.metrics_key) if key is not None]
    parts = shared_values(conn, run_parts, keys)
    out = []
    for row in rows:
        found = dict(row._mapping)
        found["metrics"] = parts.get(found.pop("metrics_key"))
        baseline = parts.get(found.pop("parts_key"), {}).get("baseline")
        found["deltas"] = baseline.get("deltas") if isinstance(baseline, dict) else None
        out.append(found)
    return out
