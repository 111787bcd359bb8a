"""Failure reports of the application, kept as candidates for the golden set until reviewed.

One row per normalised query: every report of the same question adds to its count and its
signals, and the last few reports are kept whole. Candidates wait as ``pending`` until a
person promotes one into a suite or dismisses it. The number pending is capped: past the cap
the oldest pending ones (by their last report) are dropped, and counted.

A report the database cannot hold (a NUL in PostgreSQL text, half a surrogate pair) fails its
whole batch's transaction, and would fail every batch it is tried in again: such a batch is
split until that report stands alone, which is dropped and counted (``unstorable``), and the
others are stored.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    TableValuedAlias,
    Text,
    bindparam,
    cast,
    delete,
    func,
    select,
    true,
    update,
)
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError

from ragcanary.store.errors import StorageError
from ragcanary.store.schema import candidates
from ragcanary.store.storage import Store

Status = Literal["pending", "promoted", "dismissed"]
RECENT = 5  # reports kept whole per candidate; the rest are counted only
UNSTORABLE = "unstorable"  # ragcanary_candidates_dropped_total{reason}: refused by the database
_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate written as a JSON escape: the columns are written ASCII-only, so every character
# past U+FFFF is one of these too, and a lone half (stored before the intake refused them) is.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

# The update of a stored candidate reported again, executed once with all of a batch's such
# candidates (bind names must differ from the column names).
_MERGE = (
    update(candidates)
    .where(candidates.c.key == bindparam("_key", type_=candidates.c.key.type))
    .values(
        reports=bindparam("_reports", type_=candidates.c.reports.type),
        signals=bindparam("_signals", type_=candidates.c.signals.type),
        recent=bindparam("_recent", type_=candidates.c.recent.type),
        last_at=bindparam("_last_at", type_=candidates.c.last_at.type),
    )
)


# What the readers select: ``recent`` as its JSON text, so that a row is searched for a lone
# surrogate in one pass of a regular expression, and only one that has any is walked.
_SHOWN = [
    *(c for c in candidates.c if c.name != "recent"),
    cast(candidates.c.recent, Text).label("recent"),
]


@dataclass(frozen=True)
class FailureReport:
    """One report of the application, checked and redacted, with its normalised key."""

    key: str
    query: str
    signal: str
    at: datetime
    target: str | None = None
    ids: tuple[str, ...] = ()
    note: str | None = None
    source: str | None = None

    def entry(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "signal": self.signal,
            "target": self.target,
            "ids": list(self.ids),
            "note": self.note,
            "source": self.source,
        }


@dataclass
class Added:
    """What storing a batch of reports did."""

    new: int = 0
    merged: int = 0
    # Pending candidates past the cap ("cap"), reports the database refused ("unstorable").
    dropped: dict[str, int] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)  # why each unstorable one was refused
    # Reports not stored because storage failed after part of the batch was: try them again.
    unstored: list[FailureReport] = field(default_factory=list)

    def absorb(self, other: Added) -> None:
        self.new += other.new
        self.merged += other.merged
        self.dropped = dict(Counter(self.dropped) + Counter(other.dropped))


class CandidateStore:
    """The candidates table of one ``Store``'s database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, reports: Sequence[FailureReport], max_pending: int) -> Added:
        """Store ``reports`` (merged by key) and drop the oldest pending past ``max_pending``.

        A report the database cannot hold is dropped and counted, the others stored (see the
        module). ``StorageError`` when storage fails before any of the batch is stored; after
        some is, the reports left are in ``Added.unstored``.
        """
        done = Added()
        progressed = False
        todo = [list(reports)]  # a stack: the batch's first half is on top of its second
        while todo:
            batch = todo.pop()
            try:
                done.absorb(self._add_retrying(batch, max_pending))
            except (StorageError, UnicodeError) as error:
                if not _unstorable(error):
                    if not progressed:
                        raise
                    done.unstored = [r for part in [batch, *reversed(todo)] for r in part]
                    return done
                if len(batch) > 1:
                    half = len(batch) // 2
                    todo += [batch[half:], batch[:half]]
                    continue
                done.absorb(Added(dropped={UNSTORABLE: 1}))
                done.refusals.append(str(error))
            progressed = True
        return done

    def _add_retrying(self, reports: Sequence[FailureReport], max_pending: int) -> Added:
        """Two replicas adding the same new query at once: the loser's insert fails on the
        unique key, and the whole batch is tried once more, merging this time."""
        try:
            return self._add(reports, max_pending)
        except StorageError as first:
            if not isinstance(first.__cause__, IntegrityError):
                raise
            return self._add(reports, max_pending)

    def _add(self, reports: Sequence[FailureReport], max_pending: int) -> Added:
        # A few statements per batch whatever its size (one insert and one update, each
        # executed many): this runs in a worker thread, and its Python holds the GIL that the
        # event loop answering requests waits for.
        by_key: dict[str, list[FailureReport]] = {}
        for report in reports:
            by_key.setdefault(report.key, []).append(report)
        c = candidates.c
        with self.store.writing() as conn:
            query = select(c.key, c.reports, c.signals, c.recent, c.last_at).where(
                c.key.in_(list(by_key))
            )
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            existing = {row.key: row for row in conn.execute(query)}
            inserts: list[dict[str, Any]] = []
            updates: list[dict[str, Any]] = []
            for key, group in by_key.items():
                signals = Counter(r.signal for r in group)
                recent = [r.entry() for r in group[-RECENT:]]
                last = max(r.at for r in group)
                row = existing.get(key)
                if row is None:
                    inserts.append(
                        {
                            "key": key,
                            "query": group[0].query,
                            "status": "pending",
                            "reports": len(group),
                            "signals": dict(signals),
                            "recent": recent,
                            "first_at": min(r.at for r in group),
                            "last_at": last,
                        }
                    )
                else:
                    updates.append(
                        {
                            "_key": key,
                            "_reports": row.reports + len(group),
                            "_signals": dict(Counter(row.signals) + signals),
                            "_recent": (list(row.recent) + recent)[-RECENT:],
                            "_last_at": max(row.last_at, last),
                        }
                    )
            if inserts:
                conn.execute(candidates.insert(), inserts)
            if updates:
                conn.execute(_MERGE, updates)
            dropped = self._cap(conn, max_pending)
        return Added(new=len(inserts), merged=len(updates), dropped=dropped)

    @staticmethod
    def _cap(conn: Any, max_pending: int) -> dict[str, int]:
        pending = candidates.c.status == "pending"
        count = conn.execute(select(func.count()).where(pending)).scalar_one()
        if count <= max_pending:
            return {}
        oldest = (
            select(candidates.c.candidate_id)
            .where(pending)
            .order_by(candidates.c.last_at, candidates.c.candidate_id)
            .limit(count - max_pending)
        )
        ids = list(conn.execute(oldest).scalars())
        conn.execute(delete(candidates).where(candidates.c.candidate_id.in_(ids)))
        return {"cap": len(ids)}

    def pending_page(
        self, signal: str | None, limit: int, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of the pending candidates (of ``signal``), the most reported first, and
        how many there are in all: the web page's list, which never reads the whole queue."""
        where = [candidates.c.status == "pending"]
        if signal is not None:
            where.append(candidates.c.signals[signal].as_integer().is_not(None))
        query = (
            select(*_SHOWN)
            .where(*where)
            .order_by(
                candidates.c.reports.desc(), candidates.c.last_at.desc(), candidates.c.candidate_id
            )
            .limit(limit)
            .offset(offset)
        )
        with self.store.reading() as conn:
            total = conn.execute(select(func.count()).select_from(candidates).where(*where))
            count = int(total.scalar_one())
            rows = [_row(r._mapping) for r in conn.execute(query)]
        return rows, count

    def list(
        self,
        status: Status | None = "pending",
        signal: str | None = None,
        since: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Candidates, the most reported first (then the latest reported)."""
        query = select(*_SHOWN).order_by(
            candidates.c.reports.desc(), candidates.c.last_at.desc(), candidates.c.candidate_id
        )
        if status is not None:
            query = query.where(candidates.c.status == status)
        if since is not None:
            query = query.where(candidates.c.last_at >= since)
        with self.store.reading() as conn:
            rows = [_row(r._mapping) for r in conn.execute(query)]
        if signal is not None:
            rows = [r for r in rows if signal in r["signals"]]
        return rows

    def get(self, candidate_id: int) -> dict[str, Any] | None:
        with self.store.reading() as conn:
            row = conn.execute(
                select(*_SHOWN).where(candidates.c.candidate_id == candidate_id)
            ).first()
        return None if row is None else _row(row._mapping)

    def close(self, candidate_id: int, status: Status, outcome: str) -> bool:
        """Mark a pending candidate promoted or dismissed; False when it is not pending."""
        with self.store.writing() as conn:
            done = conn.execute(
                update(candidates)
                .where(candidates.c.candidate_id == candidate_id, candidates.c.status == "pending")
                .values(status=status, outcome=outcome)
            )
        return bool(done.rowcount)

    def pending_by_signal(self) -> dict[str, int]:
        """How many pending candidates were reported with each signal.

        Counted by the database over the keys of each pending candidate's ``signals``: the
        daemon refreshes a gauge with this, and decoding every row in Python would hold the GIL
        for over 10 ms at 10,000 pending while the event loop answers requests."""
        with self.store.reading() as conn:
            keys = _signal_keys(conn.dialect.name)
            signal = keys.c[0]
            query = (
                select(signal, func.count())
                .select_from(candidates.join(keys, true()))
                .where(candidates.c.status == "pending")
                .group_by(signal)
            )
            return {str(name): int(count) for name, count in conn.execute(query)}


def _signal_keys(dialect: str) -> TableValuedAlias:
    """The keys of a candidate's ``signals``, one row each, in the first column."""
    if dialect == "postgresql":  # a json column, not jsonb
        keys = func.json_object_keys(candidates.c.signals).table_valued("signal")
        return keys.render_derived(name="signal_keys")
    return func.json_each(candidates.c.signals).table_valued("key", name="signal_keys")


def _unstorable(error: Exception) -> bool:
    """Whether the database refused a value of the batch (so the same report fails in any
    batch), rather than the batch's writing (storage down, a lock, a missing table).

    Text that is not UTF-8 (half a surrogate pair) fails as its value is encoded, before the
    statement is sent: the drivers raise ``UnicodeEncodeError`` as it is. PostgreSQL's data
    exceptions (psycopg refuses a NUL in text itself) are ``DataError``; a value no column type
    could bind is a ``StatementError`` that is no driver error.
    """
    if isinstance(error, UnicodeError):
        return True
    cause = error.__cause__
    if isinstance(cause, DataError):
        return True
    return isinstance(cause, StatementError) and not isinstance(cause, DBAPIError)


def _recent(text: str) -> list[dict[str, Any]]:
    """The kept reports of a row, from their JSON text."""
    entries: list[dict[str, Any]] = json.loads(text)
    return _readable(entries) if _SURROGATE_ESCAPE.search(text) else entries


def _readable(value: Any) -> Any:
    """``value`` as JSON and HTML can carry it: half a surrogate pair, stored before the intake
    refused them (a string cut inside an emoji), reads as U+FFFD rather than failing the page."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_readable(v) for v in value]
    if isinstance(value, dict):
        return {_readable(k): _readable(v) for k, v in value.items()}
    return value


def _row(row: Any) -> dict[str, Any]:
    return {
        "id": row["candidate_id"],
        "query": row["query"],
        "status": row["status"],
        "reports": row["reports"],
        "signals": dict(row["signals"]),
        "recent": _recent(row["recent"]),
        "first_at": row["first_at"],
        "last_at": row["last_at"],
        "outcome": row["outcome"],
    }
