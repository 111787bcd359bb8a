"""Statements the store's methods share: run summaries, a canary's history, stale vectors."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy
from sqlalchemy import Connection, and_, delete, select

from ragcanary.store.errors import StorageError
from ragcanary.store.schema import baselines as baselines_table
from ragcanary.store.schema import points, runs, vectors


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


_POINT_COLUMNS = [
    points.c[name]
    for name in (
        "run_id",
        "started_at",
        "target",
        "run_outcome",
        "outcome",
        "error",
        "latency_s",
        "top_score",
        "ids",
        "verdict",
    )
]


def history_query(
    suite: str, case_id: str, target: str | None = None, since: datetime | None = None
) -> sqlalchemy.Select[Any]:
    """The SELECT behind ``Store.case_history``: one range of the points table's key."""
    query = select(*_POINT_COLUMNS).where(points.c.suite == suite, points.c.case_id == case_id)
    if target is not None:
        query = query.where(points.c.target == target)
    if since is not None:
        query = query.where(points.c.started_at >= aware(since, "since"))
    return query.order_by(points.c.started_at, points.c.run_id, points.c.position)


def summaries() -> sqlalchemy.Select[Any]:
    return select(
        runs.c.run_id,
        runs.c.suite,
        runs.c.target,
        runs.c.started_at,
        runs.c.duration_s,
        runs.c.outcome,
        runs.c.coverage,
        # The database extracts the two objects a summary shows: a report with a thousand
        # cases is hundreds of kB that a list of fifty runs need not read or decode.
        runs.c.report["metrics"].label("metrics"),
        runs.c.report[("baseline", "deltas")].label("deltas"),
    ).order_by(runs.c.started_at.desc(), runs.c.run_id.desc())


def summary(row: Mapping[Any, Any]) -> dict[str, Any]:
    return dict(row)
