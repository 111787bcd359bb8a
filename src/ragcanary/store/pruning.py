"""Deleting runs past their retention, then the shared values no remaining run refers to.

Both in small batches, each its own transaction, so a run being stored never waits long
for the write lock (docs/performance.md, "Storage: bytes per canary-run", measures it).
A shared value (``store.shared``) first stored before the retention cutoff less ``REUSE``
can only be referred to by runs that began before the cutoff: those that remain (pinned
baselines, failed runs kept longer) keep theirs, and every other such value goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Connection,
    Select,
    Table,
    delete,
    func,
    select,
    union,
)

from ragcanary.store.schema import answers, cases, rankings, run_parts, runs, vectors
from ragcanary.store.shared import REUSE, value_key

Transaction = Callable[[], AbstractContextManager[Connection]]
# PostgreSQL advisory lock: storing a run holds it shared while it looks values up and refers
# to them; deleting values holds it alone, so no value goes between a lookup and its use.
SHARED_VALUES_LOCK = 0x7261_6764
VALUES_BATCH = 500  # shared values deleted per transaction


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


@dataclass(frozen=True)
class Unreferenced:
    """Shared values found unreferenced by a read (``find_unreferenced``), to delete a few at
    a time (``delete_values``): what the read saw, to tell what was stored since."""

    cutoff: datetime
    rankings: tuple[int, ...]
    parts: tuple[int, ...]
    older_runs: frozenset[int]  # run_key of every run that began before the cutoff
    last_ranking: int  # the highest ranking_key then


def find_unreferenced(conn: Connection, cutoff: datetime) -> Unreferenced:
    """The shared values only runs that began before ``cutoff`` could refer to, but those the
    remaining such runs refer to and the rankings others are compressed against.

    A read: it holds no write lock however long it takes, and ``delete_values`` checks what
    was stored since.
    """
    before = runs.c.started_at < cutoff
    older = {key for key in conn.execute(select(runs.c.run_key).where(before)).scalars() if key}
    kept_rankings = union(
        _rankings_of(before), select(rankings.c.dict_key.label("key")).where(_against())
    ).subquery()
    found: dict[Table, tuple[int, ...]] = {}
    for table, kept in (
        (rankings, select(kept_rankings.c.key)),
        (run_parts, select(_parts_of(before).subquery().c.key)),
    ):
        key = value_key(table)
        unused = select(key).where(table.c.created_at < cutoff - REUSE, key.not_in(kept))
        found[table] = tuple(conn.execute(unused.order_by(key)).scalars())
    last = conn.execute(select(func.max(rankings.c.ranking_key))).scalar()
    return Unreferenced(cutoff, found[rankings], found[run_parts], frozenset(older), last or 0)


def delete_values(conn: Connection, table: Table, keys: Sequence[int], found: Unreferenced) -> int:
    """Delete ``keys`` of ``table`` (``found``'s) but those a run or ranking stored since the
    read refers to; how many went. One short write transaction's work."""
    if conn.dialect.name == "postgresql":  # no run is looking them up meanwhile
        conn.execute(select(func.pg_advisory_xact_lock(SHARED_VALUES_LOCK)))
    late = [
        key
        for key in conn.execute(
            select(runs.c.run_key).where(runs.c.started_at < found.cutoff)
        ).scalars()
        if key and key not in found.older_runs
    ]
    kept: set[int] = set()
    if table is rankings:
        if late:
            kept.update(conn.execute(_rankings_of(runs.c.run_key.in_(late))).scalars())
        newer = select(rankings.c.dict_key).where(
            rankings.c.ranking_key > found.last_ranking, rankings.c.dict_key.in_(keys)
        )
        kept.update(conn.execute(newer).scalars())
    elif late:
        kept.update(conn.execute(_parts_of(runs.c.run_key.in_(late))).scalars())
    gone = [key for key in keys if key not in kept]
    if gone:
        conn.execute(delete(table).where(value_key(table).in_(gone)))
    return len(gone)


def _rankings_of(which: ColumnElement[bool]) -> Select[Any]:
    """The rankings the answers of the runs ``which`` selects refer to."""
    return (
        select(answers.c.ranking_key.label("key"))
        .select_from(runs)
        .join(cases, cases.c.suite == runs.c.suite)
        .join(
            answers,
            (answers.c.case_key == cases.c.case_key) & (answers.c.run_key == runs.c.run_key),
        )
        .where(which)
    )


def _parts_of(which: ColumnElement[bool]) -> CompoundSelect[Any]:
    """The run parts the runs ``which`` selects refer to."""
    return union(
        *(
            select(column.label("key")).where(which, column.is_not(None))
            for column in (runs.c.parts_key, runs.c.order_key, runs.c.metrics_key)
        )
    )


def _against() -> ColumnElement[bool]:
    return rankings.c.dict_key.is_not(None)
