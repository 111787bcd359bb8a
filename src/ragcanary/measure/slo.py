"""Quality SLOs: which canary answers are events, which are good, and the budget they leave.

A suite's ``slo:`` (docs/slo.md) counts each *answered, labelled* canary of an *answered* run
as one event, good when its ``good`` metric is 1 (or at least a threshold). What is left out,
and why:

- negative and label-free canaries have no Hit@k, NDCG@k, ... of their own (a negative
  canary is judged by its leak, a label-free one by drift only), so they are no event;
- an unanswered canary (timeout, 5xx, bad response) and every canary of an ``unavailable``
  run are an outage, which ragcanary never reports as a drop of quality: no event either.

Weights play no part: an event is one canary answer. Everything here is pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from ragcanary.measure.run_report import CaseEntry, RunReport

# The per-case measures a good answer may name, as a report's metrics name them.
CUT_OFF_MEASURES = ("hit_rate", "precision", "recall", "ndcg", "map")
# The windows of the burn rates shown beside the budget: those of the alerts' long windows.
BURN_WINDOWS: tuple[tuple[str, float], ...] = (("1h", 3600.0), ("6h", 6 * 3600.0))
GOOD_HINT = 'write a metric at 1, like "hit_rate@5", or a floor, like "ndcg@10 >= 0.5"'
_GOOD = re.compile(
    r"\s*(?P<metric>[a-z_]+(?:@(?P<k>\d+))?)\s*(?:(?P<op>>=|≥|[<>=!]=?)\s*(?P<value>\S+))?\s*"
)


@dataclass(frozen=True)
class GoodAnswer:
    """What makes one canary answer good: its ``metric`` at 1, or at least ``threshold``."""

    metric: str  # as a report's aggregates name it: hit_rate@5, ndcg@10, mrr, map@10
    threshold: float | None = None  # None: the metric must be 1

    @property
    def case_metric(self) -> str:
        """The key of the metric in a case's metrics (``mrr`` -> ``rr``, ``map@k`` -> ``ap@k``)."""
        if self.metric == "mrr":
            return "rr"
        if self.metric.startswith("map@"):
            return self.metric[1:]
        return self.metric

    @property
    def k(self) -> int | None:
        """The cut-off the metric needs computed, if it has one."""
        _, at, k = self.metric.partition("@")
        return int(k) if at else None

    def __str__(self) -> str:
        if self.threshold is None:
            return self.metric
        return f"{self.metric} >= {self.threshold:g}"

    def is_good(self, value: float) -> bool:
        """Whether a case whose metric is ``value`` answered well."""
        # Metrics are exact sums of fractions: a 1 may come out as 0.9999999999999999.
        floor = 1.0 if self.threshold is None else self.threshold
        return value >= floor - 1e-9


def parse_good(text: str) -> GoodAnswer:
    """The good answer ``text`` names: ``"hit_rate@5"`` or ``"ndcg@10 >= 0.5"``.

    Raises ``ValueError`` saying what is wrong with ``text`` (the caller adds the fix,
    ``GOOD_HINT``).
    """
    match = _GOOD.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a metric or a metric >= value")
    metric, k = match["metric"], match["k"]
    name = metric.partition("@")[0]
    if metric != "mrr" and not (k is not None and name in CUT_OFF_MEASURES and int(k) >= 1):
        known = ", ".join(f"{m}@K" for m in CUT_OFF_MEASURES) + " and mrr"
        raise ValueError(f"{metric!r} is not a metric a canary is scored by (known: {known})")
    if match["op"] is None:
        return GoodAnswer(metric)
    if match["op"] not in (">=", "≥"):
        raise ValueError(f"{match['op']!r} is not how a good answer is compared; use >=")
    try:
        threshold = float(match["value"])
    except ValueError:
        raise ValueError(f"{match['value']!r} is not a number") from None
    if not (math.isfinite(threshold) and 0 < threshold <= 1):
        raise ValueError(f"{metric} >= {match['value']} is not a floor above 0 and at most 1")
    return GoodAnswer(metric, threshold)


@dataclass(frozen=True)
class Objective:
    """A suite's SLO: the share of good events it promises over a rolling window."""

    objective: float  # 0 < objective < 1
    window_s: float
    good: GoodAnswer

    @property
    def budget(self) -> float:
        """The share of events allowed to be bad: 1 - objective."""
        return 1.0 - self.objective


@dataclass(frozen=True)
class Events:
    """The events of one run and the good ones among them."""

    events: int
    good: int


ANSWERED_RUNS = ("ok", "regression")  # the run outcomes whose canaries are events


def case_event(case: CaseEntry, good: GoodAnswer) -> bool | None:
    """Whether one canary of an answered run was a good event, a bad one, or (None) no event."""
    if case.kind != "labelled" or not case.answered:
        return None
    value = case.metrics.get(good.case_metric)
    if value is None or math.isnan(value):
        return None  # a metric this run did not compute: no event rather than a bad one
    return good.is_good(value)


def run_events(report: RunReport, good: GoodAnswer) -> Events:
    """The SLO events of one run (see the module docstring for what counts)."""
    if report.outcome not in ANSWERED_RUNS:
        return Events(0, 0)
    judged = [case_event(case, good) for case in report.cases]
    return Events(sum(j is not None for j in judged), sum(j is True for j in judged))


@dataclass(frozen=True)
class RunEvents:
    """One stored run's events, at the time it finished."""

    finished_at: datetime
    events: int
    good: int


@dataclass(frozen=True)
class Budget:
    """Where one pair stands against its SLO over the window ending ``now``."""

    objective: float
    window_s: float
    events: int
    good: int
    # None while the window holds no event: nothing was measured, nothing was spent.
    sli: float | None
    remaining: float | None  # share of the budget left: 1 untouched, 0 spent, below 0 overspent
    burn_rates: Mapping[str, float | None]  # by BURN_WINDOWS name; 1 spends it in the window


def budget(runs: Iterable[RunEvents], objective: Objective, now: datetime) -> Budget:
    """The error budget ``runs`` leave (those finished within the window before ``now``)."""
    recent = [r for r in runs if now - timedelta(seconds=objective.window_s) < r.finished_at <= now]
    events = sum(r.events for r in recent)
    good = sum(r.good for r in recent)
    sli = good / events if events else None
    remaining = None if sli is None else 1.0 - (1.0 - sli) / objective.budget
    burns: dict[str, float | None] = {}
    for name, seconds in BURN_WINDOWS:
        inside = [r for r in recent if now - timedelta(seconds=seconds) < r.finished_at]
        total = sum(r.events for r in inside)
        bad = total - sum(r.good for r in inside)
        burns[name] = bad / total / objective.budget if total else None
    return Budget(objective.objective, objective.window_s, events, good, sli, remaining, burns)
