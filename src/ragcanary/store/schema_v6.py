"""The tables of schema version 6 that version 7 replaced, as version 6 wrote them.

Upgrades read older databases through these (``store.migrations``); ``store.schema`` always
describes the newest version. Version 7 (``store.shared``) stores a ranking once and refers
to it, where version 6 copied every case of every run into ``results`` and ``points``.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from ragcanary.store.schema import NAME_LENGTH, OUTCOME_LENGTH, UTCDateTime

metadata_v6 = MetaData()


def _json() -> JSON:
    return JSON(none_as_null=True)


runs_v6 = Table(
    "runs",
    metadata_v6,
    Column("run_id", String(NAME_LENGTH), primary_key=True),
    Column("suite", String(NAME_LENGTH), nullable=False),
    Column("target", String(NAME_LENGTH), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("duration_s", Float),
    Column("outcome", String(OUTCOME_LENGTH), nullable=False),
    Column("coverage", Float),
    Column("report", _json(), nullable=False),  # all of the report's JSON but "cases"
    Index("runs_suite_target_started", "suite", "target", "started_at"),
    Index("runs_started", "started_at"),
)

results_v6 = Table(
    "results",
    metadata_v6,
    Column("run_id", String(NAME_LENGTH), ForeignKey("runs.run_id"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("case_id", String(NAME_LENGTH), nullable=False),
    Column("query", Text),
    Column("kind", Text),
    Column("outcome", Text),
    Column("ids", _json()),
    Column("scores", _json()),
    Column("latency_s", Float),
    Column("error", Text),
    Column("metrics", _json()),
    Column("extra", _json()),
    Index("results_case_run", "case_id", "run_id"),
)

points_v6 = Table(
    "points",
    metadata_v6,
    Column("suite", String(NAME_LENGTH), primary_key=True),
    Column("case_id", String(NAME_LENGTH), primary_key=True),
    Column("started_at", UTCDateTime(), primary_key=True),
    Column("run_id", String(NAME_LENGTH), ForeignKey("runs.run_id"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("target", String(NAME_LENGTH), nullable=False),
    Column("run_outcome", String(OUTCOME_LENGTH), nullable=False),
    Column("outcome", Text),
    Column("error", Text),
    Column("latency_s", Float),
    Column("top_score", Float),
    Column("ids", Text),  # rows.encode_ids
    Column("verdict", String(OUTCOME_LENGTH)),
    Index("points_run", "run_id"),
    sqlite_with_rowid=False,
)
