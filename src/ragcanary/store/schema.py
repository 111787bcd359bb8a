"""The database tables of runs, per-case results and baselines, their upgrades, and report rows."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
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
    func,
    inspect,
    select,
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
    # The run-level part of the report dict: everything except "cases".
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
    Column("ids", Text),  # see encode_ids
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

# Replicas of `ragcanary serve` on one PostgreSQL database (serve/replicas.py): each writes
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

Upgrade = Callable[[Connection], None]

# UPGRADES[n] turns a version-n database into version n + 1, in place, keeping its data; the
# tables above always describe the newest version. A change to them adds the next entry here
# (e.g. an ALTER TABLE ... ADD COLUMN), written in DDL both SQLite and PostgreSQL accept, or
# through SQLAlchemy like _add_points.

BACKFILL_RUNS = 200  # runs whose results are read, turned into points and written at a time


def _add_points(conn: Connection) -> None:
    """Version 1 -> 2: the points table, filled from the results already stored.

    Creates points as defined above: a later change to that table needs its own step after
    this one, and this one must then create the version-2 table explicitly.
    """
    points.create(conn)
    run_ids = list(conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars())
    for start in range(0, len(run_ids), BACKFILL_RUNS):
        batch = run_ids[start : start + BACKFILL_RUNS]
        stored = {
            row.run_id: row._mapping
            for row in conn.execute(select(runs).where(runs.c.run_id.in_(batch)))
        }
        rows = conn.execute(select(results).where(results.c.run_id.in_(batch))).all()
        new = [
            point_row(stored[row.run_id], row.position, case_entry(row._mapping)) for row in rows
        ]
        if new:
            conn.execute(points.insert(), new)


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


UPGRADES: Mapping[int, Upgrade] = {
    1: _add_points,
    2: _add_vectors,
    3: _add_replicas,
    4: _add_candidates,
}


_MIGRATE_LOCK = 0x7261_6763  # PostgreSQL advisory lock key serialising concurrent migrations


def latest_version(upgrades: Mapping[int, Upgrade]) -> int:
    """The version the tables above are at, given the upgrades that lead to them from version 1."""
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


# Reports as rows -------------------------------------------------------------------------------

_ABSENT = "~absent"  # key in results.extra listing the entry keys that were missing


def run_row(report: Mapping[str, Any]) -> dict[str, Any]:
    """The runs row of a report, after checking what the columns and queries rely on."""
    run_id = report.get("run_id")
    where = f"report {run_id!r}" if isinstance(run_id, str) else "a report"
    for key in ("run_id", "suite", "target", "outcome", "started_at"):
        if not isinstance(report.get(key), str) or not report[key]:
            raise ValueError(f"{where} has no {key} string")
    for key in ("run_id", "suite", "target"):
        if not _name(report[key]):
            raise ValueError(
                f"{where}: {key} is not plain text of {NAME_LENGTH} characters or less"
            )
    if len(report["outcome"]) > OUTCOME_LENGTH:
        raise ValueError(f"{where} has an outcome longer than {OUTCOME_LENGTH} characters")
    try:
        started_at = datetime.fromisoformat(report["started_at"])
    except ValueError:
        raise ValueError(f"{where}: started_at {report['started_at']!r} is not ISO-8601") from None
    cases = report.get("cases")
    if not isinstance(cases, list) or not all(
        isinstance(c, Mapping) and _name(c.get("id")) for c in cases
    ):
        raise ValueError(
            f"{where}: cases must be a list of objects, each with an id of plain text of "
            f"{NAME_LENGTH} characters or less"
        )
    for key in ("duration_s", "coverage"):
        if not _number_or_none(report.get(key)):
            raise ValueError(f"{where}: {key} must be a number")
    head = {key: value for key, value in report.items() if key != "cases"}
    try:
        JSON_ENCODER.encode(head)  # the cases are checked as their columns encode them
    except (TypeError, ValueError) as error:
        raise not_plain_json(where, error) from None
    return {
        "run_id": report["run_id"],
        "suite": report["suite"],
        "target": report["target"],
        # A report without an offset is taken as UTC, the daemon's clock.
        "started_at": started_at if started_at.tzinfo else started_at.replace(tzinfo=UTC),
        "duration_s": report.get("duration_s"),
        "outcome": report["outcome"],
        "coverage": report.get("coverage"),
        "report": head,
    }


def not_plain_json(where: str, error: BaseException) -> ValueError:
    """The error for a report value that JSON cannot hold: NaN, infinity, another object."""
    return ValueError(f"{where} is not plain JSON ({error}); NaN and objects cannot be stored")


def _number_or_none(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _name(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= NAME_LENGTH and _text_or_none(value)


def _float_or_none(value: Any) -> bool:
    # Only floats: an int in a float column would come back as a float, and a big one inexact.
    # NaN and infinity go to the JSON column, which refuses them.
    return value is None or (isinstance(value, float) and math.isfinite(value))


def _text_or_none(value: Any) -> bool:
    # PostgreSQL text cannot hold NUL, and neither driver can encode a lone surrogate;
    # such strings go to the JSON column, which escapes them.
    if value is None:
        return True
    if not isinstance(value, str) or "\x00" in value:
        return False
    if value.isascii():  # most text; it needs no trial encoding
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _any(value: Any) -> bool:
    return True


# Case-entry key -> (results column, whether a value fits that column), in to_report's order.
_CASE_COLUMNS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "id": ("case_id", _text_or_none),
    "query": ("query", _text_or_none),
    "kind": ("kind", _text_or_none),
    "outcome": ("outcome", _text_or_none),
    "ids": ("ids", _any),
    "scores": ("scores", _any),
    "latency_s": ("latency_s", _float_or_none),
    "error": ("error", _text_or_none),
    "metrics": ("metrics", _any),
}


VECTOR_KEY = "query_vector"  # the case-entry key whose value goes to the vectors table


def vector_row(run_id: str, position: int, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The vectors row of one case entry, or None when it has no vector the table can hold."""
    vector = entry.get(VECTOR_KEY)
    if not isinstance(vector, str) or not vector.isascii() or not vector.isprintable():
        return None
    return {"run_id": run_id, "position": position, "vector": vector}


def case_row(run_id: str, position: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The results row of one case entry; case_entry inverts it exactly."""
    row: dict[str, Any] = {"run_id": run_id, "position": position}
    extra = {key: value for key, value in entry.items() if key not in _CASE_COLUMNS}
    absent = []
    for key, (column, fits) in _CASE_COLUMNS.items():
        row[column] = None
        if key not in entry:
            absent.append(key)
        elif fits(entry[key]):
            row[column] = entry[key]
        else:
            extra[key] = entry[key]
    if absent:
        extra[_ABSENT] = absent
    row["extra"] = extra or None
    return row


def case_entry(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The case entry of a results row, equal to the one case_row was given."""
    extra = dict(row["extra"] or {})
    absent = set(extra.pop(_ABSENT, ()))
    entry = {}
    for key, (column, _fits) in _CASE_COLUMNS.items():
        if key in extra:
            entry[key] = extra.pop(key)
        elif key not in absent:
            entry[key] = row[column]
    entry.update(extra)
    return entry


def point_row(run: Mapping[Any, Any], position: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The points row of one case entry of ``run`` (a runs row): what its history shows.

    Values of unexpected types (a hand-written report's) are left out; the full report keeps
    them.
    """
    scores = entry.get("scores")
    top = scores[0] if isinstance(scores, list) and scores else None
    ids = entry.get("ids")
    return {
        "suite": run["suite"],
        "case_id": entry["id"],
        "started_at": run["started_at"],
        "run_id": run["run_id"],
        "position": position,
        "target": run["target"],
        "run_outcome": run["outcome"],
        "outcome": _text(entry.get("outcome")),
        "error": _text(entry.get("error")),
        "latency_s": _float(entry.get("latency_s")),
        "top_score": _float(top),
        "ids": _encoded_ids(ids),
    }


def _encoded_ids(ids: Any) -> str | None:
    if not isinstance(ids, list):
        return None
    try:
        return encode_ids(ids)
    except (TypeError, ValueError):  # not JSON: the run's results row refuses the same list
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and _text_or_none(value) else None


def _float(value: Any) -> float | None:
    return value if isinstance(value, float) and math.isfinite(value) else None


_ID_MARK = "\x1f"  # ASCII unit separator: written before every id of a points.ids text
_JSON_LIST = json.JSONDecoder()


def encode_ids(ids: list[Any]) -> str:
    """The text points.ids holds for a list of ids; decode_ids gives the list back.

    Each id preceded by a unit separator ("" for no ids): splitting that is ten times faster
    than decoding JSON, which matters for 8,640 points. A list the form cannot hold (an id
    with that character, or text the databases refuse, or something not an id) is JSON.
    """
    if all(isinstance(i, str) for i in ids):
        text = "".join((_ID_MARK, _ID_MARK.join(ids))) if ids else ""
        # One check of the whole text checks every id: as many marks as ids, so none holds one.
        if text.count(_ID_MARK) == len(ids) and _text_or_none(text):
            return text
    return JSON_ENCODER.encode(ids)


def decode_ids(text: str) -> list[Any]:
    """The list of ids encode_ids turned into ``text``."""
    if not text or text[0] == _ID_MARK:
        return text.split(_ID_MARK)[1:]
    ids: list[Any] = _JSON_LIST.raw_decode(text)[0]  # json.loads without its per-call checks
    return ids
