"""The database tables of runs, their answers and baselines, and of replicas and candidates."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Sequence,
    SmallInteger,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeDecorator

NAME_LENGTH = 200  # suite, target, case and run ids
OUTCOME_LENGTH = 32
DOC_ID_LENGTH = 512  # a hit's id is at most this long (docs/targets.md)


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
    # The run-level part of the report's JSON (measure.report_json) but "cases", "metrics"
    # and the SHARED_HEAD_KEYS, which are in the run_parts rows metrics_key and parts_key
    # name (store.shared).
    Column("report", _json(), nullable=False),
    # The run's number, what answers refer to it by (schema version 7); NULL only in
    # check_write's row, which nobody sees.
    Column("run_key", Integer),
    Column("parts_key", Integer),  # run_parts: the SHARED_HEAD_KEYS of the report
    Column("metrics_key", Integer),  # run_parts: the report's metrics (summaries read them)
    Column("order_key", Integer),  # run_parts: the case_keys of its cases, in report order
    # list_runs / latest_run for one pair.
    Index("runs_suite_target_started", "suite", "target", "started_at"),
    # list_runs without filters (newest first) and prune (oldest first).
    Index("runs_started", "started_at"),
    # A canary's history joins its answers to their runs by number.
    Index("runs_key", "run_key", unique=True),
)

# PostgreSQL numbers runs from this sequence; SQLite from the AUTOINCREMENT key of
# run_numbers (store.shared.next_run_key). Either never gives a number twice, even once its
# run was deleted, which pruning relies on to tell runs stored since it looked.
run_keys = Sequence("runs_run_key_seq", metadata=metadata)
run_numbers = Table(  # empty: a number is taken by inserting a row and deleting it
    "run_numbers",
    metadata,
    Column("run_key", Integer, primary_key=True, autoincrement=True),
    sqlite_autoincrement=True,
)

# Every case id a suite's runs held, numbered: an answer names its case by number.
cases = Table(
    "cases",
    metadata,
    Column("case_key", Integer, primary_key=True, autoincrement=True),
    Column("suite", String(NAME_LENGTH), nullable=False),
    Column("case_id", String(NAME_LENGTH), nullable=False),
    Index("cases_suite_case", "suite", "case_id", unique=True),
)


def _shared_values(name: str, key: str, *more: Column[Any]) -> Table:
    """A table of JSON values stored once and referred to by number (store.shared): the
    value's digest to find it again, when it was first stored (runs only reuse values stored
    near their own start, so old values can be pruned without counting references), and
    the value itself, compressed."""
    return Table(
        name,
        metadata,
        # Fixed-width columns first: PostgreSQL pads none of them then.
        Column("created_at", UTCDateTime(), nullable=False),
        Column(key, Integer, primary_key=True, autoincrement=True),
        *more,
        Column("digest", LargeBinary(16), nullable=False),
        Column("body", LargeBinary, nullable=False),
        # Digests are random, so a B-tree of them splits pages all over and stays half
        # empty; PostgreSQL's hash index holds a 4-byte hash per value, its buckets filled
        # before they split (docs/performance.md, "Storage: bytes per canary-run").
        Index(
            f"{name}_digest",
            "digest",
            postgresql_using="hash",
            postgresql_with={"fillfactor": 100},
        ),
        # Pruning. Values are stored about in time order, which a BRIN index summarises in
        # a few bytes per hundred pages on PostgreSQL.
        Index(f"{name}_created", "created_at", postgresql_using="brin"),
        # Keys only ever grow, on SQLite too (never the key of a deleted value again), which
        # pruning relies on to tell values stored since it looked (store.pruning).
        sqlite_autoincrement=True,
    )


# One canary's answer in a run but its latency: the case entry of the report with its ids,
# scores, metrics and comparison with the baseline. A canary that answers as before refers
# to the ranking stored then. A new ranking is compressed against an earlier ranking of the
# same canary (dict_key), which it mostly repeats; that one is compressed alone.
rankings = _shared_values("rankings", "ranking_key", Column("dict_key", Integer))
# Run-level values that runs share: a report's metrics per tag and baseline comparison, and
# the order of a run's cases.
run_parts = _shared_values("run_parts", "part_key")

# One canary in one run: which ranking it answered, how fast, and its verdict. The only rows
# every canary-run adds, so they hold numbers alone. Keyed by case, then run: one canary's
# history is one range of the key (SQLite keeps the rows in key order, WITHOUT ROWID).
answers = Table(
    "answers",
    metadata,
    Column("case_key", Integer, primary_key=True, autoincrement=False),
    Column("run_key", Integer, primary_key=True, autoincrement=False),
    Column("ranking_key", Integer, nullable=False),
    # The latency in whole microseconds (reports round it to 0.1 ms), else NULL and the
    # latency in latency_s; both NULL when the case has none. A NULL takes no space.
    Column("latency_us", Integer),
    # The canary's verdict in the run (measure.case_verdict) as store.shared.VERDICT_CODES,
    # or NULL for the usual one of its ranking's outcome (ok when answered, else unanswered).
    Column("verdict", SmallInteger),
    Column("latency_s", Float),
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
    Column("reason", Text),  # why it was pinned, when a person said (baseline accept --change)
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

# Declared changes (POST /api/v1/changes, `ragcanary change start`) and their maintenance
# windows: open from started_at until finished_at or ends_at, whichever is first.
changes = Table(
    "changes",
    metadata,
    Column("change_id", String(NAME_LENGTH), primary_key=True),
    Column("kind", String(OUTCOME_LENGTH), nullable=False),
    Column("description", Text, nullable=False),
    Column("targets", _json(), nullable=False),  # the target names it touches
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ends_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime()),
    Index("changes_ends_at", "ends_at"),
)

# A judge's grade of a document nobody labelled that entered a canary's top-k (schema version
# 10; store/judgments.py): queued while the judge is asked, then proposed (or refused: the judge
# answered no grade), until a person accepts or rejects it. ``key`` caches it by (document,
# query, judge fingerprint): each is graded once.
judgments = Table(
    "judgments",
    metadata,
    Column("judgment_id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(64), nullable=False, unique=True),  # sha256 of (doc, query, fingerprint)
    Column("suite", String(NAME_LENGTH), nullable=False),
    Column("target", String(NAME_LENGTH), nullable=False),
    Column("case_id", String(NAME_LENGTH), nullable=False),
    Column("doc_id", String(DOC_ID_LENGTH), nullable=False),
    Column("query", Text, nullable=False),
    Column("judge", String(NAME_LENGTH), nullable=False),
    Column("fingerprint", String(NAME_LENGTH), nullable=False),
    Column("grade", SmallInteger),  # 0-3; NULL while queued or when refused
    Column("score", Float),  # a reranker's relevance score, as it answered
    Column("state", String(16), nullable=False),  # queued proposed refused accepted rejected
    Column("note", Text),  # why the judge gave no grade
    Column("run_id", String(NAME_LENGTH), nullable=False),  # the run the id entered in
    Column("created_at", UTCDateTime(), nullable=False),
    Column("decided_at", UTCDateTime()),
    Index("judgments_state_created", "state", "created_at"),
    Index("judgments_run", "run_id"),
    Index("judgments_suite_case", "suite", "case_id"),
)

# One row per version the database was created at or upgraded to; the highest is current.
schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", UTCDateTime(), nullable=False),
)
