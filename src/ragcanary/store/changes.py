"""The changes table of one ``Store``'s database: declared changes and their windows.

Every replica on one PostgreSQL reads the same rows, so they agree on which windows are open;
a window's end is a time stored with it, so it closes on every replica alike, restarted or
not. A change never pins a baseline by itself: ``accept_baseline`` does, when a person asks
(``ragcanary baseline accept --change ID``), and the baseline keeps the change as its reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Connection

from ragcanary.errors import UsageError
from ragcanary.measure.report_json import change_in
from ragcanary.store.change_records import (
    Change,
    ChangeRequest,
    PairVerdict,
    new_change_id,
    window_end,
)
from ragcanary.store.schema import changes, runs
from ragcanary.store.storage import Store

LIST_LIMIT = 100


@dataclass(frozen=True)
class Due:
    """A change whose verdict a run of a pair is the first to carry, and the pair's last run
    before the change started (None: it had none), with that run's outcome."""

    change: Change
    before_run_id: str | None
    before_outcome: str | None


class ChangeStore:
    """Record, finish and read changes in ``store``'s database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def start(self, request: ChangeRequest, now: datetime) -> Change:
        """Record ``request`` as a change whose window opens at ``now``."""
        change = Change(
            change_id=new_change_id(now),
            kind=request.kind,
            description=request.description,
            targets=request.targets,
            started_at=now,
            ends_at=window_end(now, request.window_s),
            finished_at=None,
        )
        row = {
            "change_id": change.change_id,
            "kind": change.kind,
            "description": change.description,
            "targets": list(change.targets),
            "started_at": change.started_at,
            "ends_at": change.ends_at,
            "finished_at": None,
        }
        with self.store.writing() as conn:
            conn.execute(changes.insert().values(row))
        return change

    def finish(self, change_id: str, now: datetime) -> Change | None:
        """End the window of ``change_id`` now; a window already closed stays as it was.
        None when there is no such change."""
        with self.store.writing() as conn:
            conn.execute(
                update(changes)
                .where(
                    changes.c.change_id == change_id,
                    changes.c.finished_at.is_(None),
                    changes.c.ends_at > now,
                )
                .values(finished_at=now)
            )
            row = conn.execute(
                select(changes).where(changes.c.change_id == change_id)
            ).one_or_none()
        return None if row is None else _change(row)

    def get(self, change_id: str) -> Change | None:
        with self.store.reading() as conn:
            row = conn.execute(
                select(changes).where(changes.c.change_id == change_id)
            ).one_or_none()
        return None if row is None else _change(row)

    def recent(self, limit: int = LIST_LIMIT) -> list[Change]:
        """The newest changes first."""
        query = (
            select(changes)
            .order_by(changes.c.started_at.desc(), changes.c.change_id.desc())
            .limit(max(limit, 0))
        )
        with self.store.reading() as conn:
            return [_change(row) for row in conn.execute(query)]

    def open_at(self, at: datetime) -> list[Change]:
        """The changes whose window holds ``at``, the latest started first."""
        query = (
            select(changes)
            .where(
                changes.c.started_at <= at,
                changes.c.ends_at > at,
                or_(changes.c.finished_at.is_(None), changes.c.finished_at > at),
            )
            .order_by(changes.c.started_at.desc(), changes.c.change_id.desc())
        )
        with self.store.reading() as conn:
            return [_change(row) for row in conn.execute(query)]

    def first_good_run_after(self, change: Change, suite: str, target: str) -> str | None:
        """The pair's first run with outcome ok started once the change's window closed."""
        query = (
            select(runs.c.run_id)
            .where(
                and_(
                    runs.c.suite == suite,
                    runs.c.target == target,
                    runs.c.outcome == "ok",
                    runs.c.started_at >= change.ended_at,
                )
            )
            .order_by(runs.c.started_at, runs.c.run_id)
            .limit(1)
        )
        with self.store.reading() as conn:
            found: str | None = conn.execute(query).scalar_one_or_none()
        return found

    def due(self, suite: str, target: str, run_id: str, started_at: datetime) -> Due | None:
        """The change whose verdict the run ``run_id`` of the pair, started at ``started_at``,
        carries: one naming ``target`` whose window closed after the pair's previous run
        started and at or before this one did, so that this is the first run after it. When
        several did, the one closed last (then started last). None when there is none, or the
        pair has no run before this one (nothing was measured around the change)."""
        with self.store.reading() as conn:
            previous = _newest(conn, suite, target, started_at, run_id)
            if previous is None:
                return None
            after = previous[1]
            rows = conn.execute(
                select(changes).where(
                    changes.c.started_at <= started_at,
                    or_(changes.c.ends_at > after, changes.c.finished_at > after),
                )
            )
            closed = [
                change
                for change in map(_change, rows)
                if target in change.targets and after < change.ended_at <= started_at
            ]
            if not closed:
                return None
            change = max(closed, key=lambda c: (c.ended_at, c.started_at, c.change_id))
            before = _newest(conn, suite, target, change.started_at)
        if before is None:
            return Due(change, None, None)
        return Due(change, before[0], before[2])

    def verdicts(
        self, change: Change, pairs: Iterable[tuple[str, str]], now: datetime
    ) -> list[PairVerdict]:
        """The verdict of ``change`` on each of ``pairs`` whose target it names: the first
        run of the pair started once its window closed, and the verdict that run carries."""
        found: list[PairVerdict] = []
        touched = [(s, t) for s, t in pairs if t in change.targets]
        with self.store.reading() as conn:
            for suite, target in touched:
                row = None
                if change.state(now) == "finished":
                    query = (
                        select(runs.c.run_id, runs.c.report)
                        .where(
                            runs.c.suite == suite,
                            runs.c.target == target,
                            runs.c.started_at >= change.ended_at,
                        )
                        .order_by(runs.c.started_at, runs.c.run_id)
                        .limit(1)
                    )
                    row = conn.execute(query).one_or_none()
                verdict = None if row is None else change_in(row.report)
                if verdict is not None and verdict.id != change.change_id:
                    verdict = None  # the run carries another change's verdict
                found.append(
                    PairVerdict(suite, target, None if row is None else row.run_id, verdict)
                )
        return found

    def accept_baseline(self, change_id: str, suite: str, target: str, now: datetime) -> str:
        """Pin the pair's first good run after ``change_id`` as its baseline, with the change
        as the reason; the run id. ``UsageError`` says why nothing could be pinned."""
        change = self.get(change_id)
        if change is None:
            raise UsageError(f"no change {change_id!r}; `ragcanary change list` shows them")
        if target not in change.targets:
            raise UsageError(
                f"change {change_id} touches {', '.join(change.targets)}, not target {target!r}"
            )
        if change.state(now) == "open":
            raise UsageError(
                f"change {change_id} is still open (until {change.ends_at.isoformat()}); "
                f"finish it first: ragcanary change finish {change_id}"
            )
        run_id = self.first_good_run_after(change, suite, target)
        if run_id is None:
            raise UsageError(
                f"no run of suite {suite!r} on target {target!r} passed since change "
                f"{change_id} ended ({change.ended_at.isoformat()}); wait for one, or pin a "
                "run by id with --run"
            )
        reason = f"accepted after change {change_id} ({change.kind}: {change.description})"
        self.store.set_baseline(suite, target, run_id, reason=reason)
        return run_id


def _newest(
    conn: Connection, suite: str, target: str, before: datetime, other_than: str | None = None
) -> tuple[str, datetime, str] | None:
    """The pair's newest run started before ``before`` (not ``other_than``): its id, start
    and outcome."""
    query = select(runs.c.run_id, runs.c.started_at, runs.c.outcome).where(
        runs.c.suite == suite, runs.c.target == target, runs.c.started_at < before
    )
    if other_than is not None:
        query = query.where(runs.c.run_id != other_than)
    row = conn.execute(
        query.order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(1)
    ).one_or_none()
    return None if row is None else (row.run_id, row.started_at, row.outcome)


def _change(row: Any) -> Change:
    return Change(
        change_id=row.change_id,
        kind=row.kind,
        description=row.description,
        targets=tuple(row.targets),
        started_at=row.started_at,
        ends_at=row.ends_at,
        finished_at=row.finished_at,
    )
