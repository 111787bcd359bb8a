"""The case page's content: one canary over time, the chart's points, when relevant ids left.

A month of one canary is 8,640 runs: they are read once into columns (answered or not, each
relevant id's rank, how bad each run looks), and objects are made only for the few hundred
runs the chart draws and the rows the tables list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragcanary.measure.results import ANSWERED

MAX_POINTS = 800  # the chart's points at most: a month every 5 minutes is 8,640 runs
RECENT_ROWS = 20  # the newest runs listed in the table
RECENT_LISTS = 5  # the newest answered runs whose whole top-k lists are shown
MAX_EVENTS = 40

Row = Mapping[str, Any]  # one row of Store.case_history


@dataclass(frozen=True)
class Columns:
    """The case's runs (oldest first) column by column.

    ``badness`` orders runs on the chart: answered before unanswered, then by how many
    relevant ids are missing, then by the sum of their ranks (a missing one as depth + 1).
    """

    answered: list[bool]
    ranks: dict[str, list[int | None]]  # relevant id -> its rank in each run (None: absent)
    badness: list[tuple[int, int, int]]


@dataclass(frozen=True)
class Point:
    """The case in one run, as the tables show it."""

    row: Row
    answered: bool
    ranks: Mapping[str, int | None]

    @property
    def run_id(self) -> str:
        return str(self.row["run_id"])

    @property
    def started_at(self) -> datetime:
        moment: datetime = self.row["started_at"]
        return moment

    @property
    def run_outcome(self) -> str | None:
        return self.row.get("run_outcome")

    @property
    def outcome(self) -> str | None:
        """The query's outcome: whether and how the target answered."""
        return self.row.get("outcome")

    @property
    def verdict(self) -> str | None:
        """What the run made of the canary (``measure.case_verdict``)."""
        return self.row.get("verdict")

    @property
    def error(self) -> str | None:
        return self.row.get("error")

    @property
    def ids(self) -> list[str]:
        return list(self.row.get("ids") or ())

    @property
    def top_id(self) -> str | None:
        ids = self.row.get("ids") or ()
        return ids[0] if ids else None

    @property
    def top_score(self) -> float | None:
        score = self.row.get("top_score")
        return float(score) if isinstance(score, int | float) else None


@dataclass(frozen=True)
class Event:
    """A relevant id leaving the top-k, or coming back."""

    at: datetime
    run_id: str
    doc: str
    left: bool
    rank: int | None  # its rank before it left, or where it came back


def columns(rows: Sequence[Row], relevant: Sequence[str], depth: int) -> Columns:
    """One pass over the runs: who answered, where each relevant id ranked, how bad it looks."""
    count = len(rows)
    answered = [False] * count
    ranks: dict[str, list[int | None]] = {doc: [None] * count for doc in relevant}
    badness = [(0, 0, 0)] * count
    for i, row in enumerate(rows):
        if row.get("outcome") not in ANSWERED:
            continue
        answered[i] = True
        # The top ``depth`` only: a run stored when the suite's depth was larger holds more.
        ids = (row.get("ids") or ())[:depth]
        missing = total = 0
        for doc in relevant:
            if doc in ids:
                rank = ids.index(doc) + 1  # the first position, as in the metrics
                ranks[doc][i] = rank
                total += rank
            else:
                missing += 1
                total += depth + 1
        badness[i] = (1, missing, total)
    return Columns(answered, ranks, badness)


def point(rows: Sequence[Row], table: Columns, i: int) -> Point:
    """Run ``i`` as a point."""
    return Point(rows[i], table.answered[i], {doc: r[i] for doc, r in table.ranks.items()})


def thin(table: Columns, limit: int = MAX_POINTS) -> list[int]:
    """The indexes of at most ``limit`` runs, each the worst of its stretch of time.

    The worst, not an average or every n-th: a relevant id that left for one run out of
    thirty must still show on a month's chart.
    """
    count = len(table.badness)
    if count <= limit:
        return list(range(count))
    size = count / limit
    badness = table.badness.__getitem__
    kept = []
    for bucket in range(limit):
        low, high = round(bucket * size), round((bucket + 1) * size)
        if high > low:
            kept.append(max(range(low, high), key=badness))
    return kept


def chart_data(rows: Sequence[Row], table: Columns, depth: int) -> dict[str, Any]:
    """What the chart script plots: times, each relevant id's rank (absent: depth + 1, shown as
    "out"; unanswered: a gap) and the top score."""
    shown = thin(table)
    answered = table.answered

    def rank(ranks: list[int | None], i: int) -> int | None:
        if not answered[i]:
            return None
        found = ranks[i]
        return depth + 1 if found is None else found

    return {
        "depth": depth,
        "times": [round(rows[i]["started_at"].timestamp(), 3) for i in shown],
        "ranks": {doc: [rank(ranks, i) for i in shown] for doc, ranks in table.ranks.items()},
        "top_score": [rows[i].get("top_score") if answered[i] else None for i in shown],
        "thinned": len(shown) < len(rows),
        "runs": len(rows),
    }


def events(rows: Sequence[Row], table: Columns) -> list[Event]:
    """When each relevant id left the top-k or came back, newest first (answered runs only:
    an outage says nothing about the index)."""
    answered = [i for i, yes in enumerate(table.answered) if yes]
    found: list[Event] = []
    for doc, ranks in table.ranks.items():
        was = ranks[answered[0]] if answered else None
        for i in answered[1:]:
            now = ranks[i]
            if (was is None) != (now is None):
                row = rows[i]
                rank = was if now is None else now
                found.append(Event(row["started_at"], row["run_id"], doc, now is None, rank))
            was = now
    found.sort(key=lambda e: e.at, reverse=True)
    return found[:MAX_EVENTS]


def outcome_counts(rows: Sequence[Row]) -> list[tuple[str, int]]:
    """How often each query outcome occurred, the most frequent first."""
    return Counter(row.get("outcome") or "none" for row in rows).most_common()


def verdict_counts(rows: Sequence[Row]) -> list[tuple[str, int]]:
    """How often each verdict of the canary occurred, the most frequent first."""
    return Counter(row.get("verdict") or "unknown" for row in rows).most_common()


def absent_now(table: Columns) -> list[str]:
    """The relevant ids missing from the newest answered run's top-k."""
    for i in range(len(table.answered) - 1, -1, -1):
        if table.answered[i]:
            return [doc for doc, ranks in table.ranks.items() if ranks[i] is None]
    return []


def never_in(table: Columns) -> set[str]:
    """The relevant ids that no answered run shown had in its top-k: they did not leave it."""
    answered = [i for i, yes in enumerate(table.answered) if yes]
    return {doc for doc, ranks in table.ranks.items() if all(ranks[i] is None for i in answered)}


def recent(rows: Sequence[Row], table: Columns, count: int = RECENT_ROWS) -> list[Point]:
    """The newest ``count`` runs, newest first."""
    return [point(rows, table, i) for i in range(len(rows) - 1, max(len(rows) - count, 0) - 1, -1)]


def recent_answered(rows: Sequence[Row], table: Columns, count: int = RECENT_LISTS) -> list[Point]:
    """The newest ``count`` answered runs, newest first."""
    out: list[Point] = []
    for i in range(len(rows) - 1, -1, -1):
        if len(out) == count:
            break
        if table.answered[i]:
            out.append(point(rows, table, i))
    return out
