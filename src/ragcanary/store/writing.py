"""Storing one run (schema version 7): its runs row, the rankings and parts it does not share
with earlier runs, and one answers row per canary. ``Store.save_run`` and the upgrade from
version 6 both store runs through ``insert_run``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql, sqlite

from ragcanary.measure.case_verdict import CaseVerdict
from ragcanary.store.schema import answers, rankings, run_parts, runs
from ragcanary.store.shared import (
    SHARED_HEAD_KEYS,
    VERDICT_CODES,
    case_keys,
    next_run_key,
    pack,
    shared_keys,
    split_latency,
)


@dataclass(frozen=True)
class RunRows:
    """What storing a run writes, before the database numbers it."""

    run: Mapping[str, Any]  # its runs row (rows.run_row), the whole head in "report"
    entries: Sequence[Mapping[str, Any]]  # its case entries, less the vectors stored apart
    verdicts: Sequence[CaseVerdict | None]  # each case's verdict in the run

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for entry in self.entries:
            if entry["id"] in seen:
                raise ValueError(
                    f"report {self.run['run_id']!r} has two cases of id {entry['id']!r}; "
                    "a run's case ids are unique"
                )
            seen.add(entry["id"])


def insert_run(conn: Connection, rows: RunRows) -> bool:
    """Store ``rows``'s run unless a run of its id is stored; whether it was stored.

    Raises ValueError for a value JSON cannot hold (NaN, infinity, an object).
    """
    run, answer_rows = numbered(conn, rows)
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    added = conn.execute(
        insert(runs)
        .values(run)
        .on_conflict_do_nothing(index_elements=["run_id"])
        .returning(runs.c.run_id)
    ).first()
    if added is None:
        return False  # the values it stored are unreferenced, and pruned like old ones
    if answer_rows:
        conn.execute(answers.insert(), answer_rows)
    return True


def numbered(conn: Connection, rows: RunRows) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The runs row and answers rows of ``rows``: its run numbered, its head less the shared
    parts, every value it refers to stored (found, or written now)."""
    run = dict(rows.run)
    head = dict(run["report"])
    parts = {key: head.pop(key) for key in SHARED_HEAD_KEYS if key in head}
    split = [split_latency(entry) for entry in rows.entries]
    packed = [pack(ranking) for ranking, _latency in split]
    at = run["started_at"]
    numbers = case_keys(conn, run["suite"], [entry["id"] for entry in rows.entries])
    order = [numbers[entry["id"]] for entry in rows.entries]
    ranking_keys = shared_keys(conn, rankings, packed, at)
    parts_key, order_key = shared_keys(conn, run_parts, [pack(parts), pack(order)], at)
    run_key = next_run_key(conn)
    run.update(report=head, run_key=run_key, parts_key=parts_key, order_key=order_key)
    answer_rows = [
        {
            "case_key": case_key,
            "run_key": run_key,
            "latency_s": latency,
            "ranking_key": ranking_key,
            "verdict": None if verdict is None else VERDICT_CODES.get(verdict),
        }
        for case_key, (_ranking, latency), ranking_key, verdict in zip(
            order, split, ranking_keys, rows.verdicts, strict=True
        )
    ]
    return run, answer_rows
