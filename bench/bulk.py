"""Filling a store in bulk with exactly the rows ``Store.save_run`` writes (schema version 7).

The history, storage and ui benchmarks need stores that a thousand canaries filled for days
or weeks; through save_run, a tenth of a second a run, a month of them would take a quarter
of an hour, so they write its rows in bulk instead (executemany on SQLite, COPY on
PostgreSQL). ``Numbering`` gives each run the numbers and
shared values ``store.writing.numbered`` gives it in a database that holds only the runs
numbered here, stored in time order: it counts the keys rather than reading them back, and
keeps the newest copy of each shared value to reuse within ``REUSE``, as ``shared_keys``
finds it. ``check_saved`` proves the two agree on a run that goes through save_run itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy
from sqlalchemy import select
from sqlalchemy.pool import NullPool

from ragcanary.measure.case_verdict import CaseVerdict, RunFindings
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import RunReport
from ragcanary.store.engine import make_engine
from ragcanary.store.rows import run_row
from ragcanary.store.schema import answers, rankings, run_parts, runs
from ragcanary.store.shared import (
    REUSE,
    SHARED_HEAD_KEYS,
    Packed,
    case_keys,
    compressed,
    latency_columns,
    packed,
    split_latency,
    value_key,
    verdict_code,
)
from ragcanary.store.storage import Store

FILL_CACHE_KB = 1_000_000  # SQLite page cache while filling: the indexes grow at random places


@dataclass(frozen=True)
class Answer:
    """One canary's answer in a run, as its answers row and its ranking store it."""

    ranking: Packed  # the case entry without its latency
    outcome: Any  # the entry's outcome, which the usual verdict follows from
    latency: float | None
    verdict: int | None  # shared.verdict_code

    def judged(self, verdict: CaseVerdict) -> Answer:
        """The same answer given the verdict another run's judgement gives it."""
        return Answer(self.ranking, self.outcome, self.latency, verdict_code(verdict, self.outcome))


def answer(entry: Mapping[str, Any], verdict: CaseVerdict | None) -> Answer:
    """The answer of a case entry (``marshal``'s) whose verdict in its run is ``verdict``."""
    ranking, latency = split_latency(entry)
    outcome = ranking.get("outcome")
    return Answer(packed(ranking), outcome, latency, verdict_code(verdict, outcome))


@dataclass
class Numbered:
    """The rows storing one run writes: its runs row, the shared values it stores anew
    (key, digest, created_at, body), and its answers rows."""

    run: dict[str, Any]
    # In the tables' column order: created_at, key, (dict_key,) digest, body.
    rankings: list[tuple[Any, ...]] = field(default_factory=list)
    parts: list[tuple[Any, ...]] = field(default_factory=list)
    # case_key, run_key, ranking_key, latency_us, verdict, latency_s
    answers: list[tuple[Any, ...]] = field(default_factory=list)


class _Shared:
    """One table of shared values as ``shared.shared_keys`` fills it: a value is found again
    while it was first stored within REUSE of the run, else stored anew under the next key."""

    def __init__(self) -> None:
        self.last = 0
        self._newest: dict[bytes, tuple[int, datetime]] = {}

    def keys(
        self,
        values: Sequence[Packed],
        at: datetime,
        new: list[tuple[Any, ...]],
        row: Any = None,
    ) -> list[int]:
        """The keys of ``values``; ``row(value, key)`` makes a new value's row (default: its
        body compressed alone)."""
        earliest, latest = at - REUSE, at + REUSE
        found: dict[bytes, int] = {}
        out = []
        for value in values:
            key = found.get(value.digest)
            if key is None:
                kept = self._newest.get(value.digest)
                if kept is not None and earliest <= kept[1] <= latest:
                    key = kept[0]
                else:
                    self.last += 1
                    key = self.last
                    self._newest[value.digest] = (key, at)
                    if row is None:
                        new.append((at, key, value.digest, compressed(value.text)))
                    else:
                        new.append(row(value, key))
                found[value.digest] = key
            out.append(key)
        return out


class _Rankings(_Shared):
    """The rankings table as ``writing.numbered`` fills it: a new ranking of a canary is
    compressed against the ranking its previous answer named (or that one's own), when that
    was stored within REUSE and compressed alone."""

    def __init__(self) -> None:
        super().__init__()
        self._stored: dict[int, tuple[int | None, datetime, bytes]] = {}  # dict_key, at, text
        self._answered: dict[int, int] = {}  # case_key -> the ranking its newest answer named

    def of_run(
        self,
        cases: Sequence[int],
        values: Sequence[Packed],
        at: datetime,
        new: list[tuple[Any, ...]],
    ) -> list[int]:
        case_of = {value.digest: case for value, case in zip(values, cases, strict=True)}

        def row(value: Packed, key: int) -> tuple[Any, ...]:
            base = self._base(case_of[value.digest], at)
            against = None if base is None else self._stored[base][2]
            self._stored[key] = (base, at, value.text)
            return (at, key, base, value.digest, compressed(value.text, against))

        keys = self.keys(values, at, new, row)
        self._answered.update(zip(cases, keys, strict=True))
        return keys

    def _base(self, case: int, at: datetime) -> int | None:
        newest = self._answered.get(case)
        if newest is None:
            return None
        against = self._stored[newest][0]
        chosen = newest if against is None else against
        dict_key, stored_at, _text = self._stored[chosen]
        if dict_key is None and at - REUSE <= stored_at <= at + REUSE:
            return chosen
        return None


class Numbering:
    """Numbers runs of one suite as save_run would, run after run, in an empty database.

    Every run holds the suite's canaries in the order ``case_keys`` gives them, or none.
    """

    def __init__(self, case_keys: Sequence[int]) -> None:
        self.case_keys = list(case_keys)
        self._orders = {0: packed([]), len(case_keys): packed(self.case_keys)}
        self.run_key = 0
        self.rankings = _Rankings()
        self.parts = _Shared()

    def number(self, run: Mapping[str, Any], answered: Sequence[Answer]) -> Numbered:
        """The rows of a run: ``run`` is its runs row (``rows.run_row``, the whole head in
        "report"), ``answered`` its canaries' answers in the suite's order."""
        row = dict(run)
        head = dict(row["report"])
        parts = {key: head.pop(key) for key in SHARED_HEAD_KEYS if key in head}
        metrics = [packed(head.pop("metrics"))] if "metrics" in head else []
        at = row["started_at"]
        done = Numbered(row)
        cases = self.case_keys if answered else []
        ranking_keys = self.rankings.of_run(cases, [a.ranking for a in answered], at, done.rankings)
        order = self._orders[len(answered)]
        parts_key, order_key, *metrics_key = self.parts.keys(
            [packed(parts), order, *metrics], at, done.parts
        )
        self.run_key += 1
        row.update(
            report=head,
            run_key=self.run_key,
            parts_key=parts_key,
            order_key=order_key,
            metrics_key=metrics_key[0] if metrics_key else None,
        )
        done.answers = []
        for case, a, key in zip(cases, answered, ranking_keys, strict=True):
            latency = latency_columns(a.latency)
            done.answers.append(
                (case, self.run_key, key, latency["latency_us"], a.verdict, latency["latency_s"])
            )
        return done


def numbering(conn: sqlalchemy.Connection, suite: str, case_ids: Sequence[str]) -> Numbering:
    """The numbering of runs of ``suite`` with cases ``case_ids``, in an empty database: the
    cases are numbered through ``shared.case_keys`` itself, as the first run numbers them."""
    numbers = case_keys(conn, suite, case_ids)
    conn.commit()
    return Numbering([numbers[case_id] for case_id in case_ids])


def run_rows(report: RunReport) -> tuple[dict[str, Any], list[Answer]]:
    """The runs row and answers of a whole report, as save_run makes them."""
    data = marshal(report)
    findings = RunFindings.of_report(report)
    answered = [
        answer(entry, findings.verdict(case.id, case.outcome))
        for entry, case in zip(data["cases"], report.cases, strict=True)
    ]
    return run_row(report, data), answered


@contextlib.contextmanager
def filling(url: str) -> Iterator[sqlalchemy.Connection]:
    """A connection to fill the store at ``url`` through; PostgreSQL then runs ANALYZE, as
    autovacuum does soon after a daemon's inserts."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql(f"PRAGMA cache_size = -{FILL_CACHE_KB}")
                conn.commit()
            yield conn
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql("ANALYZE")
                conn.commit()
    finally:
        engine.dispose()


def write(conn: sqlalchemy.Connection, batch: Sequence[Numbered], numbers: Numbering) -> None:
    """One transaction: the runs of ``batch``, then their shared values and answers in bulk.

    On PostgreSQL the keys' sequences are then set past the keys written, so save_run's
    next values follow them (SQLite takes the next after the highest by itself).
    """
    dialect = conn.dialect.name
    conn.execute(runs.insert(), [done.run for done in batch])
    raw = conn.connection.dbapi_connection
    assert raw is not None
    tables: list[tuple[sqlalchemy.Table, list[Any]]] = [
        (rankings, [(stamp(dialect, r[0]), *r[1:]) for n in batch for r in n.rankings]),
        (run_parts, [(stamp(dialect, r[0]), *r[1:]) for n in batch for r in n.parts]),
        (answers, [row for done in batch for row in done.answers]),
    ]
    for into, rows in tables:
        if not rows:
            continue
        columns = ", ".join(c.name for c in into.columns)
        if dialect == "sqlite":
            marks = ", ".join("?" * len(into.columns))
            raw.executemany(f"INSERT INTO {into.name} ({columns}) VALUES ({marks})", rows)
            continue
        with (
            raw.cursor() as cursor,
            cursor.copy(f"COPY {into.name} ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
    if dialect == "sqlite" and numbers.run_key:
        # The next save_run's number follows (shared.next_run_key): AUTOINCREMENT remembers
        # the highest key a row of run_numbers ever had.
        raw.execute("INSERT INTO run_numbers (run_key) VALUES (?)", (numbers.run_key,))
        raw.execute("DELETE FROM run_numbers")
    if dialect == "postgresql":
        for sequence, last in (
            ("pg_get_serial_sequence('rankings', 'ranking_key')", numbers.rankings.last),
            ("pg_get_serial_sequence('run_parts', 'part_key')", numbers.parts.last),
            ("'runs_run_key_seq'", numbers.run_key),
        ):
            if last:
                conn.exec_driver_sql(f"SELECT setval({sequence}, {int(last)})")
    conn.commit()


def stamp(dialect: str, moment: datetime) -> Any:
    """``moment`` as UTCDateTime hands it to the driver: SQLite gets SQLAlchemy's text form."""
    if dialect == "sqlite":
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return moment.astimezone(UTC)


def check_saved(store: Store, numbers: Numbering, report: RunReport) -> None:
    """Save ``report`` through ``Store.save_run`` and check that it wrote exactly the rows
    ``numbers`` gives it: the same runs row, shared values and answers, the same keys.

    Raises RuntimeError on the first difference.
    """
    run, answered = run_rows(report)
    before = {"rankings": numbers.rankings.last, "parts": numbers.parts.last}
    wanted = numbers.number(run, answered)
    store.save_run(report)
    with store.reading() as conn:
        got = Numbered(
            dict(conn.execute(select(runs).where(runs.c.run_id == report.run_id)).one()._mapping)
        )
        for table, name in ((rankings, "rankings"), (run_parts, "parts")):
            key = value_key(table)
            stored = select(table).where(key > before[name]).order_by(key)
            getattr(got, name).extend(
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in conn.execute(stored)
            )
        query = (
            select(answers)
            .where(answers.c.run_key == got.run["run_key"])
            .order_by(answers.c.case_key)
        )
        got.answers = [tuple(row) for row in conn.execute(query)]
    wanted.answers.sort()
    for name in ("run", "rankings", "parts", "answers"):
        if getattr(got, name) != getattr(wanted, name):
            raise RuntimeError(
                f"save_run wrote other {name} rows than the bulk fill would for "
                f"{report.run_id}: {str(getattr(got, name))[:300]} != "
                f"{str(getattr(wanted, name))[:300]}"
            )
