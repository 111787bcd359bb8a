"""The fleet page's rows: every suite and target, its last run and last day, problems first.

What the fleet shows of a run never changes once the run is stored, so it is read once and
remembered (``Memo``): a page shown every few seconds then reads only the runs that are new
since, never a day of run-level reports again (one of a 1,000-canary regression is half a
megabyte of regressed cases).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.report import reason_lines
from ragcanary.serve.http.ui.render import SPARK_WIDTH, instant

# A pair whose last run is older than this many intervals (plus a minute) has stopped running.
STALE_INTERVALS = 3
# Problems first: the order of the statuses on the page.
STATUS_ORDER = ("regression", "unavailable", "stale", "never", "ok")
STATUS_TEXT = {
    "regression": "regression",
    "unavailable": "unavailable",
    "stale": "stale",
    "never": "not run yet",
    "ok": "ok",
}
# A sparkline draws every run while they fit its width in pixels, else the worst run of each
# slot of time: the shortest of these slots that leaves no more slots than pixels. Slots are
# fixed in time (multiples of their length since the epoch), and the length changes only when
# the runs shown outgrow it, so the runs drawn stay the same from one view to the next.
SLOTS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_OUTCOME_WEIGHT = {"regression": 2, "unavailable": 1}
V = TypeVar("V")


class Memo(Generic[V]):
    """Values read out of stored runs, by key, the oldest forgotten past ``limit``.

    Safe to share between the threads pages are built in; two threads may read the same
    missing value at once, which costs a read and changes nothing.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._values: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, keys: Iterable[str], read: Callable[[list[str]], Mapping[str, V]]
    ) -> dict[str, V]:
        """The value of each key, reading those not remembered with ``read`` (keys it does not
        answer for are left out)."""
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            missing = [k for k in wanted if k not in self._values]
        found = dict(read(missing)) if missing else {}
        with self._lock:
            self._values.update(found)
            while len(self._values) > self._limit:
                self._values.popitem(last=False)
            known = {k: self._values[k] for k in wanted if k in self._values}
        return {**found, **known}


def headline_hit_key(suite: SuiteConfig) -> str:
    """The Hit@k the fleet shows: the smallest k with a floor, else 5, else the largest k."""
    floors = sorted(suite.thresholds.hit_rate)
    if floors:
        return f"hit_rate@{floors[0]}"
    return "hit_rate@5" if 5 in suite.k else f"hit_rate@{max(suite.k)}"


def head_summary(report: RunReport) -> dict[str, Any]:
    """What the fleet shows of a run-level report: small enough to remember for every pair."""
    baseline = report.baseline
    reasons = reason_lines(report)  # floors first, one line a metric, then broken canaries
    stale = report.stale_labels
    return {
        "run_id": report.run_id,
        "started_at": report.started_at,
        "outcome": report.outcome,
        "coverage": report.coverage,
        "reasons": reasons[:2],
        "more_reasons": max(len(reasons) - 2, 0),
        "metrics": dict(report.metrics),
        "deltas": dict(baseline.deltas) if baseline else {},
        "score_drift": baseline.score_drift if baseline else None,
        "rank_overlap": baseline.rank_overlap if baseline else None,
        "embedding_drift": baseline.embedding_drift if baseline else None,
        "stale_labels": len(stale) if isinstance(stale, tuple) else None,  # None: cannot tell
    }


def sample(day: Sequence[tuple[str, datetime, str]], points: int = SPARK_WIDTH) -> list[int]:
    """Indexes of the runs (oldest first) a sparkline ``points`` pixels wide draws: every run
    while there are no more runs than pixels, else per slot of time its worst run (a regression
    before an outage before a pass, then the later), so a one-run drop still shows."""
    if len(day) <= points:
        return list(range(len(day)))
    span_s = (day[-1][1] - day[0][1]).total_seconds()
    # The runs span at most span / slot + 1 slots.
    slot_s = next((s for s in SLOTS_S if span_s / s + 1 <= points), SLOTS_S[-1])
    chosen: dict[int, int] = {}
    for i, (_, started_at, outcome) in enumerate(day):
        slot = int(started_at.timestamp() // slot_s)
        best = chosen.get(slot)
        if best is None or _OUTCOME_WEIGHT.get(outcome, 0) >= _OUTCOME_WEIGHT.get(day[best][2], 0):
            chosen[slot] = i
    return sorted(chosen.values())


@dataclass
class PairRow:
    """One suite and target as the fleet shows it."""

    suite: str
    target: str
    status: str
    hit_key: str
    run_id: str | None = None  # the newest run, whatever its outcome
    answered_run_id: str | None = None  # the newest answered run (its metrics are shown)
    started_at: datetime | None = None
    age_s: float | None = None
    next_run_at: datetime | None = None
    next_in_s: float | None = None
    running: bool = False
    hit: float | None = None
    hit_delta: float | None = None
    mrr: float | None = None
    mrr_delta: float | None = None
    coverage: float | None = None
    score_drift: float | None = None
    rank_overlap: float | None = None
    embedding_drift: float | None = None
    stale_labels: int | None = None  # what the newest answered run found; None: cannot tell
    reasons: list[str] = field(default_factory=list)
    more_reasons: int = 0
    hit_series: list[float | None] = field(default_factory=list)
    mrr_series: list[float | None] = field(default_factory=list)
    runs_day: int = 0
    problems_day: int = 0

    @property
    def status_text(self) -> str:
        return STATUS_TEXT[self.status]


def pair_row(
    suite: str,
    target: str,
    config: SuiteConfig,
    interval_s: float,
    heads: Sequence[Mapping[str, Any]],
    day_outcomes: Sequence[str],
    spark: Mapping[str, list[float | None]],
    job: Mapping[str, Any] | None,
    now: datetime,
) -> PairRow:
    """The row of one pair from the summaries of its newest runs (``head_summary``, newest
    first: the newest, and the newest answered when that was an outage), the outcomes of its
    last day, its sparklines' values and its scheduler job."""
    hit_key = headline_hit_key(config)
    row = PairRow(suite, target, "never", hit_key)
    if job is not None:
        row.next_run_at = instant(job.get("next_run_at"))
        row.next_in_s = (row.next_run_at - now).total_seconds() if row.next_run_at else None
        row.running = bool(job.get("running"))
    row.hit_series = list(spark.get(hit_key, ()))
    row.mrr_series = list(spark.get("mrr", ()))
    row.runs_day = len(day_outcomes)
    row.problems_day = sum(outcome != "ok" for outcome in day_outcomes)
    if not heads:
        return row
    newest = heads[0]
    answered = heads[-1] if heads[-1].get("outcome") != "unavailable" else None
    row.run_id = newest.get("run_id")
    row.started_at = instant(newest.get("started_at"))
    row.age_s = (now - row.started_at).total_seconds() if row.started_at else None
    row.coverage = newest.get("coverage")
    row.reasons = list(newest.get("reasons") or ())
    row.more_reasons = int(newest.get("more_reasons") or 0)
    outcome = newest.get("outcome")
    row.status = outcome if outcome in ("regression", "unavailable") else "ok"
    if row.status == "ok" and (
        row.age_s is not None and row.age_s > STALE_INTERVALS * interval_s + 60
    ):
        row.status = "stale"
    if answered is not None:
        row.answered_run_id = answered.get("run_id")
        metrics, deltas = answered.get("metrics") or {}, answered.get("deltas") or {}
        row.hit, row.hit_delta = metrics.get(hit_key), deltas.get(hit_key)
        row.mrr, row.mrr_delta = metrics.get("mrr"), deltas.get("mrr")
        row.score_drift = answered.get("score_drift")
        row.rank_overlap = answered.get("rank_overlap")
        row.embedding_drift = answered.get("embedding_drift")
        found = answered.get("stale_labels")
        row.stale_labels = found if isinstance(found, int) else None
    return row


def problems_first(rows: Sequence[PairRow]) -> list[PairRow]:
    """Regressions, then outages, stale and never-run pairs, then the healthy; by name within."""
    return sorted(rows, key=lambda r: (STATUS_ORDER.index(r.status), r.suite, r.target))
