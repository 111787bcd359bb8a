"""Failure reports of the application, kept as candidates for the golden set until reviewed.

One row per normalised query: every report of the same question adds to its count and its
signals, and the last few reports are kept whole. Candidates wait as ``pending`` until a
person promotes one into a suite or dismisses it. The number pending is capped: past the cap
the oldest pending ones (by their last report) are dropped, and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import TableValuedAlias, bindparam, delete, func, select, true, update
from sqlalchemy.exc import IntegrityError

from ragcanary.store.errors import StorageError
from ragcanary.store.schema import candidates
from ragcanary.store.storage import Store

Status = Literal["pending", "promoted", "dismissed"]
RECENT = 5  # reports kept whole per candidate; the rest are counted only

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
    dropped: dict[str, int] = field(default_factory=dict)  # pending candidates past the cap


class CandidateStore:
    """The candidates table of one ``Store``'s database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, reports: Sequence[FailureReport], max_pending: int) -> Added:
        """Store ``reports`` (merged by key) and drop the oldest pending past ``max_pending``.

        Two replicas adding the same new query at once: the loser's insert fails on the
        unique key, and the whole batch is tried once more, merging this time.
        """
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
            select(candidates)
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
        query = select(candidates).order_by(
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
                select(candidates).where(candidates.c.candidate_id == candidate_id)
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


def _row(row: Any) -> dict[str, Any]:
    return {
        "id": row["candidate_id"],
        "query": row["query"],
        "status": row["status"],
        "reports": row["reports"],
        "signals": dict(row["signals"]),
        "recent": list(row["recent"]),
        "first_at": row["first_at"],
        "last_at": row["last_at"],
        "outcome": row["outcome"],
    }
