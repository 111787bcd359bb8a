"""Deleting runs past their retention, then the shared values no remaining run refers to.

Both in small batches, each its own transaction, so a run being stored never waits long
for the write lock (docs/performance.md, "Storage: bytes per canary-run", measures it).
A shared value (``store.shared``) first stored before the retention cutoff less ``REUSE``
can only be referred to by runs that began before the cutoff: those that remain (pinned
baselines, failed runs kept longer) keep theirs, and every other such value goes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, delete, func, select, union

from ragcanary.store.schema import answers, cases, rankings, run_parts, runs, vectors
from ragcanary.store.shared import REUSE

Transaction = Callable[[], AbstractContextManager[Connection]]
# PostgreSQL advisory lock: storing a run holds it shared while it looks values up and refers
# to them; deleting values holds it alone, so no value goes between a lookup and its use.
SHARED_VALUES_LOCK = 0x7261_6764
VALUES_BATCH = 2_000  # shared values deleted per transaction


def delete_runs(conn: Connection, batch: Select[Any]) -> int:
    """Delete the runs ``batch`` selects (run_id, run_key, suite) and all they hold."""
    found = conn.execute(batch).all()
    if not found:
        return 0
    run_ids = [run_id for run_id, _key, _suite in found]
    run_keys = [key for _id, key, _suite in found if key is not None]
    suites = sorted({suite for _id, _key, suite in found})
    conn.execute(delete(vectors).where(vectors.c.run_id.in_(run_ids)))
    if run_keys:
        their_cases = select(cases.c.case_key).where(cases.c.suite.in_(suites))
        conn.execute(
            delete(answers).where(
                answers.c.case_key.in_(their_cases), answers.c.run_key.in_(run_keys)
            )
        )
    conn.execute(delete(runs).where(runs.c.run_id.in_(run_ids)))
    return len(found)


def delete_unreferenced(write: Transaction, cutoff: datetime) -> int:
    """Delete the shared values only runs that began before ``cutoff`` could refer to, but
    those the remaining such runs refer to; how many went."""
    before = runs.c.started_at < cutoff
    referred_by_runs = (
        select(answers.c.ranking_key.label("key"))
        .select_from(runs)
        .join(cases, cases.c.suite == runs.c.suite)
        .join(
            answers,
            (answers.c.case_key == cases.c.case_key) & (answers.c.run_key == runs.c.run_key),
        )
        .where(before)
    )
    referred = union(
        select(runs.c.parts_key.label("key")).where(before, runs.c.parts_key.is_not(None)),
        select(runs.c.order_key.label("key")).where(before, runs.c.order_key.is_not(None)),
        select(runs.c.metrics_key.label("key")).where(before, runs.c.metrics_key.is_not(None)),
    ).subquery()
    kept_parts = select(referred.c.key)
    # A ranking another is compressed against stays while that one does.
    compressed_against = select(rankings.c.dict_key.label("key")).where(
        rankings.c.dict_key.is_not(None)
    )
    kept_ranking_keys = union(referred_by_runs, compressed_against).subquery()
    kept_rankings = select(kept_ranking_keys.c.key)
    deleted = 0
    for table, kept in ((rankings, kept_rankings), (run_parts, kept_parts)):
        key = table.primary_key.columns.values()[0]
        unused = (
            select(key)
            .where(table.c.created_at < cutoff - REUSE, key.not_in(kept))
            .limit(VALUES_BATCH)
        )
        while True:
            with write() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(select(func.pg_advisory_xact_lock(SHARED_VALUES_LOCK)))
                gone = list(conn.execute(unused).scalars())
                if gone:
                    conn.execute(delete(table).where(key.in_(gone)))
            deleted += len(gone)
            if not gone:  # not a short batch: deleting a ranking may free the one it needed
                break
    return deleted
