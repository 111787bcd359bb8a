"""Schema versions: the upgrades from each version to the next, and migrating a database."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import (
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    func,
    inspect,
    or_,
    select,
    text,
    update,
)

from ragcanary.measure.case_verdict import RunFindings, case_verdict
from ragcanary.measure.results import ANSWERED
from ragcanary.store.rows_v6 import case_entry, point_row
from ragcanary.store.schema import (
    NAME_LENGTH,
    OUTCOME_LENGTH,
    UTCDateTime,
    answers,
    baselines,
    candidates,
    cases,
    changes,
    claims,
    judgments,
    metadata,
    rankings,
    replicas,
    run_keys,
    run_numbers,
    run_parts,
    runs,
    schema_version,
    vectors,
)
from ragcanary.store.schema_v6 import points_v6 as points
from ragcanary.store.schema_v6 import results_v6 as results
from ragcanary.store.schema_v6 import runs_v6
from ragcanary.store.writing import RunRows, numbered

log = structlog.get_logger("ragcanary")

Upgrade = Callable[[Connection], None]

# UPGRADES[n] turns a version-n database into version n + 1, in place, keeping its data; the
# tables of store.schema always describe the newest version. A change to them adds the next
# entry here (e.g. an ALTER TABLE ... ADD COLUMN), written in DDL both SQLite and PostgreSQL
# accept, or through SQLAlchemy like _add_points.

BACKFILL_RUNS = 200  # runs whose results are read, turned into points and written at a time


# The points table as version 2 created it; version 6 adds its verdict column.
_POINTS_V2 = Table(
    "points",
    MetaData(),
    Column("suite", String(NAME_LENGTH), primary_key=True),
    Column("case_id", String(NAME_LENGTH), primary_key=True),
    Column("started_at", UTCDateTime(), primary_key=True),
    Column("run_id", String(NAME_LENGTH), ForeignKey(runs_v6.c.run_id), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("target", String(NAME_LENGTH), nullable=False),
    Column("run_outcome", String(OUTCOME_LENGTH), nullable=False),
    Column("outcome", Text),
    Column("error", Text),
    Column("latency_s", Float),
    Column("top_score", Float),
    Column("ids", Text),
    Index("points_run", "run_id"),
    sqlite_with_rowid=False,
)


def _add_points(conn: Connection) -> None:
    """Version 1 -> 2: the points table, filled from the results already stored."""
    _POINTS_V2.create(conn)
    run_ids = list(conn.execute(select(runs_v6.c.run_id).order_by(runs_v6.c.run_id)).scalars())
    for start in range(0, len(run_ids), BACKFILL_RUNS):
        batch = run_ids[start : start + BACKFILL_RUNS]
        stored = {
            row.run_id: row._mapping
            for row in conn.execute(select(runs_v6).where(runs_v6.c.run_id.in_(batch)))
        }
        rows = conn.execute(select(results).where(results.c.run_id.in_(batch))).all()
        new = [
            point_row(stored[row.run_id], row.position, case_entry(row._mapping), None)
            for row in rows
        ]
        for row in new:
            del row["verdict"]  # not a column yet: _add_verdicts fills it in
        if new:
            conn.execute(_POINTS_V2.insert(), new)


def _add_vectors(conn: Connection) -> None:
    """Version 2 -> 3: the vectors table, empty (older runs were stored without vectors)."""
    vectors.create(conn)


def _add_replicas(conn: Connection) -> None:
    """Version 3 -> 4: the replicas and claims tables, empty."""
    replicas.create(conn)
    claims.create(conn)


def _add_candidates(conn: Connection) -> None:
    """Version 4 -> 5: the candidates table, empty."""
    candidates.create(conn)


def _add_verdicts(conn: Connection) -> None:
    """Version 5 -> 6: points.verdict, each canary's verdict in each stored run.

    Most points are decided by their query outcome alone (answered and named by no finding:
    ok; not answered: unanswered), in two statements; then the cases each run's
    ``regressions`` and ``failures`` name (extracted by the database, a few per run) are
    given theirs, the way ``save_run`` gives them (``RunFindings.verdict``).
    """
    conn.execute(text(f"ALTER TABLE points ADD COLUMN verdict VARCHAR({OUTCOME_LENGTH})"))
    answered = sorted(ANSWERED)
    conn.execute(
        update(points).where(points.c.outcome.in_(answered)).values(verdict=case_verdict("ok"))
    )
    unanswered = or_(points.c.outcome.is_(None), points.c.outcome.not_in(answered))
    conn.execute(update(points).where(unanswered).values(verdict=case_verdict(None)))
    run_ids = list(conn.execute(select(runs_v6.c.run_id).order_by(runs_v6.c.run_id)).scalars())
    named = (runs_v6.c.run_id, runs_v6.c.report["regressions"], runs_v6.c.report["failures"])
    changes = (
        update(points)
        .where(points.c.run_id == bindparam("r"), points.c.position == bindparam("p"))
        .values(verdict=bindparam("v"))
    )
    for start in range(0, len(run_ids), BACKFILL_RUNS):
        batch = run_ids[start : start + BACKFILL_RUNS]
        found = {
            run_id: RunFindings.of(regressions, failures)
            for run_id, regressions, failures in conn.execute(
                select(*named).where(runs_v6.c.run_id.in_(batch))
            )
        }
        for run_id, findings in found.items():
            cases = findings.regressed | set(findings.failed)
            if not cases:
                continue
            rows = conn.execute(
                select(points.c.position, points.c.case_id, points.c.outcome).where(
                    points.c.run_id == run_id, points.c.case_id.in_(sorted(cases))
                )
            )
            verdicts = [
                {"r": run_id, "p": position, "v": findings.verdict(case_id, outcome)}
                for position, case_id, outcome in rows
            ]
            if verdicts:
                conn.execute(changes, verdicts)


def _share_rankings(conn: Connection) -> None:
    """Version 6 -> 7: every ranking stored once (store.shared), runs numbered.

    Each run's results rows become its answers, referring to rankings and parts shared with
    other runs, as ``save_run`` stores them; its points rows' verdicts carry over. Then the
    results and points tables go. Runs are read and written BACKFILL_RUNS at a time, oldest
    first (runs close in time share the most), with progress in the log.
    """
    for column in ("run_key", "parts_key", "order_key", "metrics_key"):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {column} INTEGER"))
    next(index for index in runs.indexes if index.name == "runs_key").create(conn)
    for table in (cases, rankings, run_parts, answers, run_numbers):
        table.create(conn)
    if conn.dialect.name == "postgresql":
        run_keys.create(conn)
    in_order = select(runs_v6.c.run_id).order_by(runs_v6.c.started_at, runs_v6.c.run_id)
    run_ids = list(conn.execute(in_order).scalars())
    log.info("upgrading storage to schema version 7", runs=len(run_ids))
    for start in range(0, len(run_ids), BACKFILL_RUNS):
        batch = run_ids[start : start + BACKFILL_RUNS]
        for rows in _stored_runs(conn, batch):
            run, answer_rows = numbered(conn, rows)
            conn.execute(
                update(runs)
                .where(runs.c.run_id == run["run_id"])
                .values(
                    {
                        key: run[key]
                        for key in ("report", "run_key", "parts_key", "order_key", "metrics_key")
                    }
                )
            )
            if answer_rows:
                conn.execute(answers.insert(), answer_rows)
        log.info(
            "upgrading storage to schema version 7",
            runs_done=start + len(batch),
            runs=len(run_ids),
        )
    points.drop(conn)
    results.drop(conn)


def _add_judgments(conn: Connection) -> None:
    """Version 9 -> 10: the judgments table, empty (docs/judgments.md)."""
    judgments.create(conn)


def _stored_runs(conn: Connection, run_ids: list[str]) -> list[RunRows]:
    """The runs ``run_ids`` of a version-6 database as save_run would store them."""
    heads = {
        row.run_id: dict(row._mapping)
        for row in conn.execute(select(runs_v6).where(runs_v6.c.run_id.in_(run_ids)))
    }
    entries: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    for row in conn.execute(
        select(results).where(results.c.run_id.in_(run_ids)).order_by(results.c.position)
    ):
        entries[row.run_id].append(case_entry(row._mapping))
    verdicts = {
        (run_id, position): verdict
        for run_id, position, verdict in conn.execute(
            select(points.c.run_id, points.c.position, points.c.verdict).where(
                points.c.run_id.in_(run_ids)
            )
        )
    }
    return [
        RunRows(
            run=heads[run_id],
            entries=entries[run_id],
            verdicts=[verdicts.get((run_id, i)) for i in range(len(entries[run_id]))],
        )
        for run_id in run_ids
    ]


def _fill_digest_buckets(conn: Connection) -> None:
    """Version 7 -> 8: PostgreSQL's hash indexes of digests fill their buckets before they
    split (fillfactor 100, not 75): a third fewer bytes per new ranking, and a lookup reads one
    bucket either way (docs/performance.md, "Storage: bytes per canary-run"). Buckets split
    from now on are filled so; SQLite has no such index."""
    if conn.dialect.name != "postgresql":
        return
    for table in (rankings, run_parts):
        conn.execute(text(f"ALTER INDEX {table.name}_digest SET (fillfactor = 100)"))


def _add_changes(conn: Connection) -> None:
    """Version 8 -> 9: the changes table, empty, and why each baseline was pinned."""
    changes.create(conn)
    conn.execute(text(f"ALTER TABLE {baselines.name} ADD COLUMN reason TEXT"))


UPGRADES: Mapping[int, Upgrade] = {
    1: _add_points,
    2: _add_vectors,
    3: _add_replicas,
    4: _add_candidates,
    5: _add_verdicts,
    6: _share_rankings,
    7: _fill_digest_buckets,
    8: _add_changes,
    9: _add_judgments,
}


_MIGRATE_LOCK = 0x7261_6763  # PostgreSQL advisory lock key serialising concurrent migrations


def latest_version(upgrades: Mapping[int, Upgrade]) -> int:
    """The version of store.schema's tables, given the upgrades that lead to them from version 1."""
    expected = set(range(1, len(upgrades) + 1))
    if set(upgrades) != expected:
        raise ValueError(f"upgrades must be numbered 1..{len(upgrades)}, got {sorted(upgrades)}")
    return len(upgrades) + 1


def current_version(conn: Connection) -> int | None:
    """The schema version of the database behind ``conn``, or None before it has tables."""
    if not inspect(conn).has_table(schema_version.name):
        return None
    version: int | None = conn.execute(select(func.max(schema_version.c.version))).scalar()
    return version


def migrate(conn: Connection, upgrades: Mapping[int, Upgrade], now: datetime) -> None:
    """Create the tables at the newest version, or upgrade older ones in place, in one transaction.

    Raises ValueError when the database is newer than ``upgrades`` lead to.
    """
    latest = latest_version(upgrades)
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_MIGRATE_LOCK)))
    version = current_version(conn)
    if version is None:
        metadata.create_all(conn)
        conn.execute(schema_version.insert().values(version=latest, applied_at=now))
        return
    if version > latest:
        raise ValueError(f"schema version {version} is newer than this ragcanary knows ({latest})")
    for step in range(version, latest):
        upgrades[step](conn)
        conn.execute(schema_version.insert().values(version=step + 1, applied_at=now))
