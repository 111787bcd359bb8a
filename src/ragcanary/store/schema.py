"""The database tables of runs, per-case results and baselines, and of replicas and candidates."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeDecorator

NAME_LENGTH = 200  # suite, target, case and run ids
OUTCOME_LENGTH = 32


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware instant, stored in UTC and always read back as an aware UTC datetime.

    SQLite keeps no offset at all, so values are normalised to UTC on the way in (which also
    keeps its text comparisons chronological) and given back their UTC offset on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"{value.isoformat()} has no timezone; pass an aware datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is UTC:
            return value
        if value.tzinfo is None:
            # Not value.replace(tzinfo=UTC): that is 15 times slower, 20 ms of a 30-day history.
            return datetime.combine(value.date(), value.time(), UTC)
        return value.astimezone(UTC)


def _json() -> JSON:
    # Python None becomes SQL NULL rather than the JSON text 'null': smaller, and the same on read.
    return JSON(none_as_null=True)


# What the JSON columns hold: compact (per-case ids, scores and metrics are most of a
# database's size), and without NaN or infinity, which no JSON reader takes back.
JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(NAME_LENGTH), primary_key=True),
    Column("suite", String(NAME_LENGTH), nullable=False),
    Column("target", String(NAME_LENGTH), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("duration_s", Float),
    Column("outcome", String(OUTCOME_LENGTH), nullable=False),
    Column("coverage", Float),
    # The run-level part of the report's JSON (measure.report_json): all but "cases".
    Column("report", _json(), nullable=False),
    # list_runs / latest_run for one pair, and case_history's join when it starts from runs.
    Index("runs_suite_target_started", "suite", "target", "started_at"),
    # list_runs without filters (newest first) and prune (oldest first).
    Index("runs_started", "started_at"),
)

results = Table(
    "results",
    metadata,
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
    # Every other key of the case entry (vs_baseline...), and values that do not fit a column.
    Column("extra", _json()),
    # One canary's history: every run that has the case, then a primary-key hop to runs.
    Index("results_case_run", "case_id", "run_id"),
)

# One canary's answer in one run: the few values its history shows, copied out of the wide
# results rows when the run is saved. Keyed by (suite, case, time), so reading 30 days of one
# canary is one short range scan: SQLite keeps the rows in key order (WITHOUT ROWID), and no
# bulky JSON (scores, metrics, comparison) is read or decoded on the way.
points = Table(
    "points",
    metadata,
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
    Column("ids", Text),  # see rows.encode_ids
    # The canary's verdict in the run (measure.case_verdict), beside its query outcome: what
    # the run's judgement made of the answer. Schema version 6; filled in for older runs.
    Column("verdict", String(OUTCOME_LENGTH)),
    # prune deletes a run's points by run_id.
    Index("points_run", "run_id"),
    sqlite_with_rowid=False,
)

# The query vectors of a run's cases (a case entry's query_vector, which results leaves out),
# kept only for the runs a later run is compared with: each pair's pinned baseline and its
# newest run with vectors. So storage stays bounded however long runs are kept.
vectors = Table(
    "vectors",
    metadata,
    Column("run_id", String(NAME_LENGTH), ForeignKey("runs.run_id"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("vector", Text, nullable=False),  # base64 of little-endian float32
)

baselines = Table(
    "baselines",
    metadata,
    Column("suite", String(NAME_LENGTH), primary_key=True),
    Column("target", String(NAME_LENGTH), primary_key=True),
    Column("run_id", String(NAME_LENGTH), ForeignKey("runs.run_id"), nullable=False),
    Column("set_at", UTCDateTime(), nullable=False),
)

# Replicas of `ragcanary serve` on one PostgreSQL database (serve/replicas/): each writes
# its row every few seconds; those seen recently are alive and share the jobs.
replicas = Table(
    "replicas",
    metadata,
    Column("replica_id", String(NAME_LENGTH), primary_key=True),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("seen_at", UTCDateTime(), nullable=False),
    Column("config_hash", String(NAME_LENGTH), nullable=False),
    Column("version", String(NAME_LENGTH), nullable=False),
)

# One row per scheduled tick of a job that a replica took: the primary key lets exactly one
# replica have it, whichever replicas try. run_id is the run the tick became.
claims = Table(
    "claims",
    metadata,
    Column("job", String(2 * NAME_LENGTH + 1), primary_key=True),
    Column("tick", UTCDateTime(), primary_key=True),
    Column("replica_id", String(NAME_LENGTH), nullable=False),
    Column("run_id", String(NAME_LENGTH), nullable=False),
    Column("claimed_at", UTCDateTime(), nullable=False),
    Index("claims_tick", "tick"),  # prune
)

# Failure reports of the application (POST /api/v1/candidates), one row per normalised query:
# how often and how it was reported, the last few reports, and what review made of it.
candidates = Table(
    "candidates",
    metadata,
    Column("candidate_id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(64), nullable=False, unique=True),  # sha256 of the normalised query
    Column("query", Text, nullable=False),  # as first reported, personal data redacted
    Column("status", String(16), nullable=False),  # pending, promoted, dismissed
    Column("reports", Integer, nullable=False),
    Column("signals", _json(), nullable=False),  # signal -> times reported with it
    Column("recent", _json(), nullable=False),  # the last reports: at, signal, target, ids, ...
    Column("first_at", UTCDateTime(), nullable=False),
    Column("last_at", UTCDateTime(), nullable=False),
    Column("outcome", Text),  # the dismissal's reason, or the suite and case it became
    Index("candidates_status_last", "status", "last_at"),
)

# One row per version the database was created at or upgraded to; the highest is current.
schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", UTCDateTime(), nullable=False),
)
