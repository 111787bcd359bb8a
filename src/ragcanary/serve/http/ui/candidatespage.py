"""The candidates page: failure reports waiting for review, and what their target answers now.

The list comes from storage one page at a time (``CandidateStore.pending_page``). The live
results of the first ``LIVE_ROWS`` candidates shown are asked of their targets at once,
through the daemon (its clients and limits, ``Service.search``); the page waits at most
``LIVE_DEADLINE_S`` for them, and a target that failed or did not answer in time is shown as
such on its candidates, never as an error page.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragcanary.measure.results import ANSWERED, Answer
from ragcanary.serve.http.ui.views import PageError
from ragcanary.serve.metrics.families import CANDIDATE_SIGNALS

if TYPE_CHECKING:
    from ragcanary.serve.service import Service

PAGE_ROWS = 50  # candidates listed per page
LIVE_ROWS = 20  # of those, the first ones whose target is asked now
LIVE_DEADLINE_S = 3.0  # the page waits this long for the targets, whatever their timeouts
LIVE_DEPTH = 10  # hits shown per live result, as `ragcanary candidates show` does
LATE = "late"  # the live outcome of a query still unanswered at the page's deadline


@dataclass(frozen=True)
class Live:
    """What a candidate's target answered for its query just now."""

    target: str
    outcome: str  # a query outcome (ok, timeout, http_5xx, ...) or LATE
    error: str | None
    hits: list[tuple[str, float | None]]
    latency_s: float | None

    @property
    def answered(self) -> bool:
        return self.outcome in ANSWERED


@dataclass(frozen=True)
class Candidate:
    """One pending failure report (by normalised query) as the page shows it."""

    id: int
    query: str
    status: str
    outcome: str | None  # a promoted or dismissed one's case or reason
    reports: int
    signals: list[tuple[str, int]]  # the most used first
    first_at: datetime
    last_at: datetime
    sources: list[str]
    target: str | None  # the target asked for live results
    target_named: bool  # whether a report named it (else: the config's first target)
    reported_ids: list[str]  # what the application retrieved, over the kept reports
    recent: list[Mapping[str, Any]]  # the kept reports, newest first
    live: Live | None = None


def target_of(
    recent: Sequence[Mapping[str, Any]], targets: Sequence[str]
) -> tuple[str | None, bool]:
    """The target the application last named (and the config still has), else the config's
    first target; and whether a report named it."""
    named = [str(r["target"]) for r in recent if r.get("target") in targets]
    if named:
        return named[-1], True
    return (targets[0], False) if targets else (None, False)


def candidate(row: Mapping[str, Any], targets: Sequence[str]) -> Candidate:
    """A row of ``CandidateStore`` as the page shows it."""
    recent = [r for r in row.get("recent") or () if isinstance(r, Mapping)]
    target, named = target_of(recent, targets)
    signals = sorted(dict(row.get("signals") or {}).items(), key=lambda s: (-int(s[1]), s[0]))
    ids = [str(i) for r in recent for i in r.get("ids") or ()]
    sources = [str(r["source"]) for r in recent if r.get("source")]
    return Candidate(
        id=int(row["id"]),
        query=str(row["query"]),
        status=str(row.get("status")),
        outcome=row.get("outcome"),
        reports=int(row["reports"]),
        signals=[(str(s), int(n)) for s, n in signals],
        first_at=row["first_at"],
        last_at=row["last_at"],
        sources=list(dict.fromkeys(sources)),
        target=target,
        target_named=named,
        reported_ids=list(dict.fromkeys(ids)),
        recent=list(reversed(recent)),
    )


def listing(service: Service, signal: str | None, page_no: int) -> dict[str, Any]:
    """The page's candidates (storage only; ``with_live`` adds the live results)."""
    if signal is not None and signal not in CANDIDATE_SIGNALS:
        raise PageError(
            400,
            "Unknown signal",
            f"No signal {signal!r}.",
            f"Pick one of: {', '.join(CANDIDATE_SIGNALS)}.",
        )
    rows, total = service.pending_page(signal, PAGE_ROWS, (page_no - 1) * PAGE_ROWS)
    pages = max(1, math.ceil(total / PAGE_ROWS))
    if page_no > pages:  # past the end (the queue shrank): the last page
        page_no = pages
        rows, total = service.pending_page(signal, PAGE_ROWS, (page_no - 1) * PAGE_ROWS)
    config = service.loaded.config
    targets = list(config.targets)
    return {
        "page": "candidates",
        "rows": [candidate(r, targets) for r in rows],
        "total": total,
        "signal": signal or "",
        "signals": CANDIDATE_SIGNALS,
        "pages": pages,
        "page_no": page_no,
        "first_no": (page_no - 1) * PAGE_ROWS + 1,
        "live_rows": LIVE_ROWS,
        "deadline_s": LIVE_DEADLINE_S,
        "intake_on": bool(config.ingest_token),
        "suites": list(config.suites),
    }


def one(service: Service, candidate_id: int) -> dict[str, Any]:
    """One candidate, whatever its status, with all its kept reports."""
    row = service.candidate(candidate_id)
    if row is None:
        raise PageError(
            404,
            "No such candidate",
            f"No candidate {candidate_id} is stored.",
            "Dropped past the cap of pending candidates, or never reported; see the list.",
        )
    config = service.loaded.config
    return {
        "page": "candidates",
        "candidate": candidate(row, list(config.targets)),
        "live_rows": LIVE_ROWS,
        "suites": list(config.suites),
    }


async def with_live(
    service: Service, shown: Sequence[Candidate], deadline_s: float = LIVE_DEADLINE_S
) -> list[Candidate]:
    """``shown`` with the live results of the first ``LIVE_ROWS`` (the rest unchanged):
    each target asked for all its queries at once, the whole bounded by ``deadline_s``."""
    asked = [c for c in shown[:LIVE_ROWS] if c.target is not None]
    by_target: dict[str, list[Candidate]] = {}
    for c in asked:
        by_target.setdefault(str(c.target), []).append(c)
    answers: dict[int, Answer] = {}
    known = service.loaded.config.targets
    tasks = []
    for target, group in by_target.items():
        if target not in known:  # removed by a reload since the list was read
            continue

        def keep(index: int, answer: Answer, group: list[Candidate] = group) -> None:
            answers[group[index].id] = answer

        queries = [c.query for c in group]
        tasks.append(asyncio.ensure_future(service.search(target, queries, LIVE_DEPTH, keep)))
    if tasks:
        _, late = await asyncio.wait(tasks, timeout=deadline_s)
        for task in late:
            task.cancel()
        # Collect every outcome (a cancellation included) so that none is left unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)
    live = {c.id: _live(c, answers.get(c.id), deadline_s, c.target in known) for c in asked}
    return [replace(c, live=live[c.id]) if c.id in live else c for c in shown]


def _live(c: Candidate, answer: Answer | None, deadline_s: float, known: bool) -> Live:
    target = str(c.target)
    if not known:
        return Live(target, "unknown_target", "the config no longer has this target", [], None)
    if answer is None:
        return Live(target, LATE, f"no answer within the page's {deadline_s:g} s", [], None)
    hits = list(zip(answer.ids, answer.scores, strict=False))[:LIVE_DEPTH]
    return Live(target, answer.outcome, answer.error, hits, answer.latency_s)
