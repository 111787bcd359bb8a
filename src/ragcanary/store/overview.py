"""The narrow reads behind the web pages and the diff: runs by id, their metrics, a case's rows.

``Store``'s general reads return whole reports; the run-level report of a 1,000-canary run
that regressed lists every regressed case and metric (half a megabyte), and a page that read a
day of them would decode hundreds of megabytes it never shows. These read only what a page
shows: run ids and outcomes, the metrics object out of a report (extracted by the database),
the run-level report of the few runs a page is about, or one case's rows in a few runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from ragcanary.measure.report_json import (
    read_index_lookup,
    read_numbers,
    read_stale_labels,
    unmarshal,
)
from ragcanary.measure.run_report import IndexLookup, RunReport, StaleLabelEntry
from ragcanary.store import reading
from ragcanary.store.schema import run_parts, runs
from ragcanary.store.shared import shared_values
from ragcanary.store.storage import Store


def day_runs(
    store: Store, pairs: Iterable[tuple[str, str]], since: datetime
) -> dict[tuple[str, str], list[tuple[str, datetime, str]]]:
    """Per pair, its runs started at ``since`` or later, oldest first: run_id, started_at and
    outcome (no JSON is read: a day of a pair is 288 runs, and a report may be megabytes)."""
    wanted = set(pairs)
    suites = sorted({suite for suite, _ in wanted})
    out: dict[tuple[str, str], list[tuple[str, datetime, str]]] = {pair: [] for pair in wanted}
    if not suites:
        return out
    query = (
        select(runs.c.suite, runs.c.target, runs.c.run_id, runs.c.started_at, runs.c.outcome)
        .where(runs.c.started_at >= since, runs.c.suite.in_(suites))
        .order_by(runs.c.started_at, runs.c.run_id)
    )
    with store.reading() as conn:
        rows = conn.execute(query).all()
    for suite, target, run_id, started_at, outcome in rows:
        found = out.get((suite, target))
        if found is not None:
            found.append((run_id, started_at, outcome))
    return out


def newest_runs(
    store: Store, pairs: Iterable[tuple[str, str]], *, answered: bool = False
) -> dict[tuple[str, str], tuple[str, datetime, str]]:
    """Per pair, the run_id, started_at and outcome of its newest run (``answered``: its newest
    run that was not unavailable); pairs without one are absent."""
    out: dict[tuple[str, str], tuple[str, datetime, str]] = {}
    with store.reading() as conn:
        for suite, target in pairs:
            query = (
                select(runs.c.run_id, runs.c.started_at, runs.c.outcome)
                .where(runs.c.suite == suite, runs.c.target == target)
                .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
                .limit(1)
            )
            if answered:
                query = query.where(runs.c.outcome != "unavailable")
            found = conn.execute(query).first()
            if found is not None:
                out[(suite, target)] = (found.run_id, found.started_at, found.outcome)
    return out


def run_metrics(store: Store, run_ids: Iterable[str]) -> dict[str, dict[str, float | None]]:
    """The run-level metrics of the stored runs among ``run_ids``, by run_id; the database
    extracts them from each report, so the rest of it (regressed cases) never crosses over."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return {}
    query = select(runs.c.run_id, runs.c.metrics_key).where(runs.c.run_id.in_(wanted))
    with store.reading() as conn:
        keys = dict(conn.execute(query).all())
        metrics = shared_values(conn, run_parts, (k for k in keys.values() if k is not None))
    return {run_id: read_numbers(metrics.get(key)) for run_id, key in keys.items()}


def stale_findings(
    store: Store, run_ids: Iterable[str]
) -> dict[str, tuple[tuple[StaleLabelEntry, ...] | None, IndexLookup | None]]:
    """The stale labels each of the stored runs ``run_ids`` found (its report's
    ``stale_labels``; None where the run could not tell) and when it looked the index up (its
    ``index_lookup``; None in runs stored before it was recorded), by run_id."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return {}
    query = select(
        runs.c.run_id, runs.c.report["stale_labels"], runs.c.report["index_lookup"]
    ).where(runs.c.run_id.in_(wanted))
    with store.reading() as conn:
        return {
            run_id: (read_stale_labels(found), read_index_lookup(lookup))
            for run_id, found, lookup in conn.execute(query)
        }


def run_heads(store: Store, run_ids: Iterable[str]) -> dict[str, RunReport]:
    """The stored runs among ``run_ids`` without their cases (``cases`` empty), by run_id."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return {}
    query = select(*reading.HEAD_COLUMNS).where(runs.c.run_id.in_(wanted))
    with store.reading() as conn:
        found = reading.heads(conn, conn.execute(query).all())
    return {run_id: unmarshal({**head, "cases": []}) for run_id, head in found.items()}


def neighbours(
    store: Store, suite: str, target: str, started_at: datetime, run_id: str
) -> tuple[str | None, str | None]:
    """The run ids of the pair's run just before and just after the run ``run_id``."""
    pair = (runs.c.suite == suite, runs.c.target == target)
    earlier = (runs.c.started_at < started_at) | (
        (runs.c.started_at == started_at) & (runs.c.run_id < run_id)
    )
    later = (runs.c.started_at > started_at) | (
        (runs.c.started_at == started_at) & (runs.c.run_id > run_id)
    )
    before = (
        select(runs.c.run_id)
        .where(*pair, earlier)
        .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )
    after = (
        select(runs.c.run_id)
        .where(*pair, later)
        .order_by(runs.c.started_at, runs.c.run_id)
        .limit(1)
    )
    with store.reading() as conn:
        return conn.execute(before).scalar(), conn.execute(after).scalar()


def recent_runs(store: Store, suite: str, target: str, limit: int) -> list[dict[str, Any]]:
    """The pair's newest runs, newest first: run_id, started_at and outcome only."""
    query = (
        select(runs.c.run_id, runs.c.started_at, runs.c.outcome)
        .where(runs.c.suite == suite, runs.c.target == target)
        .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
        .limit(limit)
    )
    with store.reading() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def run_at(store: Store, suite: str, target: str, at: datetime) -> str | None:
    """The run id of the pair's newest run started at ``at`` or earlier, or None."""
    query = (
        select(runs.c.run_id)
        .where(runs.c.suite == suite, runs.c.target == target, runs.c.started_at <= at)
        .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )
    with store.reading() as conn:
        found: str | None = conn.execute(query).scalar()
    return found


def case_entries(store: Store, run_ids: Iterable[str], case_id: str) -> dict[str, dict[str, Any]]:
    """The report entry of case ``case_id`` in each of the runs ``run_ids`` that has it."""
    with store.reading() as conn:
        return reading.case_entries(conn, run_ids, case_id)
