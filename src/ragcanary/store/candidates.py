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

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from ragcanary.store.schema import candidates
from ragcanary.store.storage import StorageError, Store

Status = Literal["pending", "promoted", "dismissed"]
RECENT = 5  # reports kept whole per candidate; the rest are counted only


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
        added = Added()
        by_key: dict[str, list[FailureReport]] = {}
        for report in reports:
            by_key.setdefault(report.key, []).append(report)
        with self.store.writing() as conn:
            query = select(candidates).where(candidates.c.key.in_(list(by_key)))
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            existing = {row.key: row for row in conn.execute(query)}
            for key, group in by_key.items():
                signals = Counter(r.signal for r in group)
                recent = [r.entry() for r in group][-RECENT:]
                last = max(r.at for r in group)
                row = existing.get(key)
                if row is None:
                    conn.execute(
                        candidates.insert().values(
                            key=key,
                            query=group[0].query,
                            status="pending",
                            reports=len(group),
                            signals=dict(signals),
                            recent=recent,
                            first_at=min(r.at for r in group),
                            last_at=last,
                        )
                    )
                    added.new += 1
                    continue
                merged = Counter(row.signals) + signals
                conn.execute(
                    update(candidates)
                    .where(candidates.c.key == key)
                    .values(
                        reports=row.reports + len(group),
                        signals=dict(merged),
                        recent=(list(row.recent) + recent)[-RECENT:],
                        last_at=max(row.last_at, last),
                    )
                )
                added.merged += 1
            added.dropped = self._cap(conn, max_pending)
        return added

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
        """How many pending candidates were reported with each signal."""
        with self.store.reading() as conn:
            rows = conn.execute(
                select(candidates.c.signals).where(candidates.c.status == "pending")
            ).scalars()
            counts: Counter[str] = Counter()
            for signals in rows:
                counts.update(signals.keys())
        return dict(counts)


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
