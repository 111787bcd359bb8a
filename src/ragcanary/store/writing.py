"""Storing one run (schema version 7): its runs row, the rankings and parts it does not share
with earlier runs, and one answers row per canary. ``Store.save_run`` and the upgrade from
version 6 both store runs through ``insert_run``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from ragcanary.measure.case_verdict import CaseVerdict
from ragcanary.store.engine import insert_for
from ragcanary.store.schema import answers, rankings, run_parts, runs
from ragcanary.store.shared import (
    REUSE,
    SHARED_HEAD_KEYS,
    Packed,
    case_keys,
    compressed,
    latency_columns,
    next_run_key,
    packed,
    shared_keys,
    shared_texts,
    split_latency,
    verdict_code,
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
    insert = insert_for(conn)
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
    metrics = [packed(head.pop("metrics"))] if "metrics" in head else []
    split = [split_latency(entry) for entry in rows.entries]
    values = [packed(ranking) for ranking, _latency in split]
    at = run["started_at"]
    numbers = case_keys(conn, run["suite"], [entry["id"] for entry in rows.entries])
    order = [numbers[entry["id"]] for entry in rows.entries]
    case_of = {value.digest: case for value, case in zip(values, order, strict=True)}

    def against_earlier(new: Sequence[Packed]) -> list[dict[str, Any]]:
        bases = _bases(conn, [case_of[value.digest] for value in new], at)
        made: list[dict[str, Any]] = []
        for value in new:
            base = bases.get(case_of[value.digest])
            if base is None:
                made.append({"body": compressed(value.text), "dict_key": None})
            else:
                made.append({"body": compressed(value.text, base[1]), "dict_key": base[0]})
        return made

    ranking_keys = shared_keys(conn, rankings, values, at, against_earlier)
    parts_key, order_key, *metrics_key = shared_keys(
        conn, run_parts, [packed(parts), packed(order), *metrics], at
    )
    run.update(
        report=head,
        run_key=next_run_key(conn),
        parts_key=parts_key,
        order_key=order_key,
        metrics_key=metrics_key[0] if metrics_key else None,
    )
    answer_rows = [
        {
            "case_key": case_key,
            "run_key": run["run_key"],
            "ranking_key": ranking_key,
            "verdict": verdict_code(verdict, ranking.get("outcome")),
            **latency_columns(latency),
        }
        for case_key, (ranking, latency), ranking_key, verdict in zip(
            order, split, ranking_keys, rows.verdicts, strict=True
        )
    ]
    return run, answer_rows


def _bases(
    conn: Connection, case_numbers: Sequence[int], at: datetime
) -> dict[int, tuple[int, bytes]]:
    """Per case, the ranking a new ranking of it is compressed against, and its text: the
    ranking its newest stored answer refers to, or the one that ranking was compressed
    against, if stored within REUSE of ``at`` and compressed alone (so a ranking is read
    with at most one other). Cases without one are absent: their ranking is stored alone."""
    chosen: dict[int, int] = {}
    for case in dict.fromkeys(case_numbers):
        newest = (
            select(answers.c.ranking_key)
            .where(answers.c.case_key == case)
            .order_by(answers.c.run_key.desc())
            .limit(1)
            .scalar_subquery()
        )
        found = conn.execute(
            select(rankings.c.ranking_key, rankings.c.dict_key, rankings.c.created_at).where(
                rankings.c.ranking_key == newest
            )
        ).first()
        if found is not None:
            chosen[case] = found.ranking_key if found.dict_key is None else found.dict_key
    if not chosen:
        return {}
    near = conn.execute(
        select(rankings.c.ranking_key).where(
            rankings.c.ranking_key.in_(sorted(set(chosen.values()))),
            rankings.c.dict_key.is_(None),
            rankings.c.created_at >= at - REUSE,
            rankings.c.created_at <= at + REUSE,
        )
    ).scalars()
    texts = shared_texts(conn, rankings, near)
    return {case: (key, texts[key]) for case, key in chosen.items() if key in texts}
