"""Judgments of documents nobody labelled: claimed for the judge, graded, then reviewed.

A judgment's life (docs/judgments.md): ``queued`` while the judge is asked (``claim``), then
``proposed`` with its grade, or ``refused`` when the judge answered no grade (``record``), or
deleted again when the judge could not be reached (``release``: a later run asks again); a
person turns a proposed one ``accepted`` or ``rejected`` (``decide``). Each (document, query,
judge fingerprint) has one row (its ``key``), so a document is graded once per query and judge,
whichever run, suite or replica found it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, delete, func, select, update

from ragcanary.store.engine import insert_for
from ragcanary.store.schema import judgments
from ragcanary.store.storage import Store

State = Literal["queued", "proposed", "refused", "accepted", "rejected"]
STATES: tuple[State, ...] = ("queued", "proposed", "refused", "accepted", "rejected")
DECIDED: tuple[State, ...] = ("accepted", "rejected")
# A queued row older than this belongs to a grading that died with its process: the
# document is free to be claimed again.
ABANDONED = timedelta(hours=1)


def judgment_key(doc_id: str, query: str, fingerprint: str) -> str:
    """The cache key of a grade: sha256 of the document id, the query and the fingerprint."""
    text = json.dumps([doc_id, query, fingerprint], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Wanted:
    """A document that entered a canary's top-k without a label: what a run asks to grade."""

    suite: str
    target: str
    case_id: str
    doc_id: str
    query: str
    run_id: str


@dataclass(frozen=True)
class Judgment:
    """One stored judgment."""

    id: int
    suite: str
    target: str
    case_id: str
    doc_id: str
    query: str
    judge: str
    fingerprint: str
    grade: int | None
    score: float | None
    state: str
    note: str | None
    run_id: str
    created_at: datetime
    decided_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        """The judgment as the API and ``--json`` show it."""
        return {
            "id": self.id,
            "suite": self.suite,
            "target": self.target,
            "case": self.case_id,
            "doc_id": self.doc_id,
            "query": self.query,
            "judge": self.judge,
            "fingerprint": self.fingerprint,
            "grade": self.grade,
            "score": self.score,
            "state": self.state,
            "note": self.note,
            "run_id": self.run_id,
            "created_at": self.created_at.isoformat(),
            "decided_at": None if self.decided_at is None else self.decided_at.isoformat(),
        }

    @classmethod
    def from_row(cls, row: Any) -> Judgment:
        return cls(
            id=row.judgment_id,
            suite=row.suite,
            target=row.target,
            case_id=row.case_id,
            doc_id=row.doc_id,
            query=row.query,
            judge=row.judge,
            fingerprint=row.fingerprint,
            grade=row.grade,
            score=row.score,
            state=row.state,
            note=row.note,
            run_id=row.run_id,
            created_at=row.created_at,
            decided_at=row.decided_at,
        )


class JudgmentStore:
    """The judgments table of one ``Store``'s database. Every call blocks: run it in a
    worker thread; each raises ``StorageError`` when storage cannot answer."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def claim(
        self,
        wanted: Sequence[Wanted],
        judge: str,
        fingerprint: str,
        now: datetime,
        limit: int,
        per_day: int | None = None,
    ) -> list[Judgment]:
        """Queue for the judge the documents of ``wanted`` it never graded for their query,
        at most ``limit`` of them and no more than ``per_day`` less what ``judge`` took since
        the start of ``now``'s UTC day; the queued judgments, in the order wanted."""
        c = judgments.c
        keyed: dict[str, Wanted] = {}
        for want in wanted:
            keyed.setdefault(judgment_key(want.doc_id, want.query, fingerprint), want)
        with self.store.writing() as conn:
            conn.execute(
                delete(judgments).where(c.state == "queued", c.created_at < now - ABANDONED)
            )
            known = set(_existing(conn, list(keyed)))
            budget = limit
            if per_day is not None:
                day = now.replace(hour=0, minute=0, second=0, microsecond=0)
                taken = conn.execute(
                    select(func.count()).where(c.judge == judge, c.created_at >= day)
                ).scalar_one()
                budget = min(budget, max(0, per_day - int(taken)))
            fresh = [(key, want) for key, want in keyed.items() if key not in known][:budget]
            if not fresh:
                return []
            rows = [
                {
                    "key": key,
                    "suite": want.suite,
                    "target": want.target,
                    "case_id": want.case_id,
                    "doc_id": want.doc_id,
                    "query": want.query,
                    "judge": judge,
                    "fingerprint": fingerprint,
                    "state": "queued",
                    "run_id": want.run_id,
                    "created_at": now,
                }
                for key, want in fresh
            ]
            # Another replica may queue the same document at the same moment: one row wins.
            conn.execute(insert_for(conn)(judgments).on_conflict_do_nothing(), rows)
            mine = {key for key, _ in fresh}
            query = select(judgments).where(
                c.key.in_(sorted(mine)), c.state == "queued", c.created_at == now
            )
            found = {row.key: Judgment.from_row(row) for row in conn.execute(query)}
        return [found[key] for key, _ in fresh if key in found]

    def record(
        self, judgment_id: int, grade: int | None, score: float | None, note: str | None
    ) -> None:
        """The judge's answer for a queued judgment: proposed with ``grade``, or refused
        (``grade`` None) with ``note`` saying why."""
        state: State = "refused" if grade is None else "proposed"
        with self.store.writing() as conn:
            conn.execute(
                update(judgments)
                .where(judgments.c.judgment_id == judgment_id, judgments.c.state == "queued")
                .values(state=state, grade=grade, score=score, note=note)
            )

    def release(self, judgment_ids: Iterable[int]) -> None:
        """Forget queued judgments the judge could not be asked for: a later run asks again."""
        ids = list(judgment_ids)
        if not ids:
            return
        with self.store.writing() as conn:
            conn.execute(
                delete(judgments).where(
                    judgments.c.judgment_id.in_(ids), judgments.c.state == "queued"
                )
            )

    def decide(self, judgment_id: int, state: State, now: datetime) -> bool:
        """Accept or reject a proposed judgment; False when it is not proposed."""
        with self.store.writing() as conn:
            done = conn.execute(
                update(judgments)
                .where(judgments.c.judgment_id == judgment_id, judgments.c.state == "proposed")
                .values(state=state, decided_at=now)
            )
        return bool(done.rowcount)

    def get(self, judgment_id: int) -> Judgment | None:
        with self.store.reading() as conn:
            row = conn.execute(
                select(judgments).where(judgments.c.judgment_id == judgment_id)
            ).first()
        return None if row is None else Judgment.from_row(row)

    def find(
        self,
        state: str | None = "proposed",
        *,
        suite: str | None = None,
        case_id: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
    ) -> list[Judgment]:
        """Judgments, newest first, of one state, suite, case or run if given."""
        c = judgments.c
        query = select(judgments).order_by(c.created_at.desc(), c.judgment_id.desc()).limit(limit)
        for column, value in (
            (c.state, state),
            (c.suite, suite),
            (c.case_id, case_id),
            (c.run_id, run_id),
        ):
            if value is not None:
                query = query.where(column == value)
        with self.store.reading() as conn:
            return [Judgment.from_row(row) for row in conn.execute(query)]

    def pending(self) -> int:
        """Proposed judgments waiting for a person (``ragcanary_judgments_pending``)."""
        with self.store.reading() as conn:
            count = conn.execute(
                select(func.count()).where(judgments.c.state == "proposed")
            ).scalar_one()
        return int(count)

    def graded(self) -> list[Judgment]:
        """Every judgment with a grade (proposed, accepted, rejected): agreement's input."""
        c = judgments.c
        query = select(judgments).where(c.grade.is_not(None), c.state != "refused")
        with self.store.reading() as conn:
            return [Judgment.from_row(row) for row in conn.execute(query.order_by(c.judgment_id))]


def _existing(conn: Connection, keys: list[str]) -> Iterable[str]:
    """The keys of ``keys`` that have a row, in batches the databases take."""
    for start in range(0, len(keys), 500):
        batch = keys[start : start + 500]
        yield from conn.execute(select(judgments.c.key).where(judgments.c.key.in_(batch))).scalars()
