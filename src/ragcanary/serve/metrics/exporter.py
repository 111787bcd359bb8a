"""The daemon's Prometheus metrics (docs/metrics.md), kept in one explicit registry."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import TypeVar, cast

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.metrics import MetricWrapperBase

import ragcanary
from ragcanary.measure.lost_ids import AnnRecall
from ragcanary.measure.results import OUTCOMES
from ragcanary.measure.run_report import Absent, CaseEntry, RunReport
from ragcanary.measure.slo import GoodAnswer, Objective, run_events
from ragcanary.serve.metrics.exposition import MergedCollector, PairSeries, join_text
from ragcanary.serve.metrics.families import (
    CANDIDATE_SIGNALS,
    CAUSES,
    JUDGE_ERRORS,
    PairFamilies,
    ProcessFamilies,
)

RUN_OUTCOMES = ("ok", "regression", "unavailable")

Pair = tuple[str, str]  # (suite, target)
Labels = tuple[str, ...]  # label values after suite and target
Series = tuple[MetricWrapperBase, Labels]
Setting = tuple[Gauge, Labels]  # a gauge series of one pair, as a key of the values to set
M = TypeVar("M", bound=MetricWrapperBase)


@dataclass(frozen=True)
class SuitePairs:
    """What the exporter needs to know of one configured suite to lay out its series."""

    targets: tuple[str, ...]
    ks: tuple[int, ...]
    per_case_metrics: bool = False
    case_ids: tuple[str, ...] = ()  # in suite order; the per-case cap keeps the first ones
    # What the verdict compares with (``max_drop``, ``min_coverage``, floors as ``hit_rate@5``),
    # exported so alert rules read the suite's own limits instead of copies of the defaults.
    thresholds: Mapping[str, float] = field(default_factory=dict)
    interval_seconds: float | None = None  # the schedule's interval (cron: its median gap)
    slo: Objective | None = None  # the suite's quality SLO (docs/slo.md)


@dataclass(frozen=True)
class _Layout:
    ks: frozenset[str]
    cases: frozenset[str]  # cases admitted to per-case series (empty when not opted in)
    good: GoodAnswer | None = None  # what the SLO counts as good; None: no SLO


def per_case_admission(spec: SuitePairs, limit: int) -> tuple[tuple[str, ...], int]:
    """The cases that get per-case series under ``limit`` series, and how many series are dropped.

    A case costs one series per k (``case_hit_rate``) plus one (``case_rr``); cases are
    admitted whole, in suite order, so a dashboard never shows half a canary.
    """
    if not spec.per_case_metrics:
        return (), 0
    cases = tuple(dict.fromkeys(spec.case_ids))
    cost = len(set(spec.ks)) + 1
    admitted = cases[: max(0, limit) // cost]
    return admitted, (len(cases) - len(admitted)) * cost


class Exporter:
    """Every ``ragcanary_*`` series of the daemon; fed with configs and run reports, scraped as is.

    Counters and histograms exist at 0 as soon as a suite is loaded. Quality gauges appear
    with the first answered run and, during an outage, keep the value of the last one.

    Each pair's series live in a registry of their own (``serve.metrics.exposition``), so that
    ``exposition()`` renders again only the pairs that changed; ``registry`` shows them all
    merged, as one registry would.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        version: str = ragcanary.__version__,
        per_case_limit: int = 1000,
    ) -> None:
        # A fresh registry by default: the global one would leak series between tests and
        # between exporters in one process.
        self.registry = registry if registry is not None else CollectorRegistry()
        self._per_case_limit = per_case_limit
        self._layouts: dict[Pair, _Layout] = {}
        self._series: dict[Pair, set[Series]] = {}
        self._base = CollectorRegistry()  # the series that belong to no pair
        self._pairs: dict[Pair, PairSeries] = {}
        self.registry.register(MergedCollector(self._base, self._pairs))

        self._f = PairFamilies()
        self._p = ProcessFamilies(self._base, version)
        self._info: dict[Gauge, str | None] = {}  # the URL each info gauge shows
        self._storage_measured = False
        self._maintenance: frozenset[Pair] = frozenset()  # pairs inside a change window
        self._judge_errors: set[tuple[str, str]] = set()  # (judge, reason) series laid out

    def load(
        self,
        pairs: Mapping[str, SuitePairs],
        *,
        config_hash: str | None = None,
        ui_url: str | None = None,
        runbook_url: str | None = None,
    ) -> None:
        """Lay out the series of the configured suites; forget those no longer configured.

        Called at start and on every accepted reload. Counters keep their values for pairs
        that stay; series of a k, case, threshold or pair that left the configuration are
        removed. ``config_hash`` replaces the one ``ragcanary_config_hash`` shows.
        ``ui_url`` is the base URL ``ragcanary_ui_info`` shows, ``runbook_url`` the one
        ``ragcanary_runbook_info`` shows; None exports no such series.
        """
        if config_hash is not None:
            self._p.config_hash.clear()
            self._p.config_hash.labels(config_hash).set(1)
        self._set_info(self._p.ui_info, ui_url)
        self._set_info(self._p.runbook_info, runbook_url)
        wanted = {(suite, target): spec for suite, spec in pairs.items() for target in spec.targets}
        for pair in set(self._layouts) - set(wanted):
            del self._layouts[pair]
            self._series.pop(pair, None)
            del self._pairs[pair]
        for pair, spec in wanted.items():
            if pair not in self._pairs:
                self._pairs[pair] = PairSeries(self._f.factories)
            admitted, dropped = per_case_admission(spec, self._per_case_limit)
            good = spec.slo.good if spec.slo is not None else None
            layout = _Layout(frozenset(str(k) for k in spec.ks), frozenset(admitted), good)
            self._layouts[pair] = layout
            self._prune(pair, layout)
            for outcome in RUN_OUTCOMES:
                self._child(self._f.runs, pair, outcome)
            self._child(self._f.skipped, pair)
            for query_outcome in OUTCOMES:
                self._child(self._f.queries, pair, query_outcome)
            for cause in CAUSES:
                self._child(self._f.diagnosis, pair, cause)
            self._child(self._f.query_duration, pair)
            self._child(self._f.run_duration, pair)
            held = self._child(self._f.maintenance, pair)
            held.set(1 if pair in self._maintenance else 0)
            if spec.per_case_metrics:
                self._child(self._f.case_dropped, pair).set(dropped)
            else:
                self._remove(pair, lambda metric, labels: metric is self._f.case_dropped)
            self._load_settings(pair, spec)
            self._load_slo(pair, spec.slo)

    def _set_info(self, gauge: Gauge, url: str | None) -> None:
        """Show ``url`` in the info ``gauge`` (``{url}``), in place of the previous one."""
        shown = self._info.get(gauge)
        if url == shown:
            return  # unchanged: no scrape may catch the series missing
        if shown is not None:
            gauge.remove(shown)
        if url is not None:
            gauge.labels(url).set(1)
        self._info[gauge] = url

    def _load_settings(self, pair: Pair, spec: SuitePairs) -> None:
        """Export the pair's thresholds and interval; drop those the new config no longer has."""
        thresholds = {name: float(v) for name, v in spec.thresholds.items() if math.isfinite(v)}
        self._remove(
            pair,
            lambda metric, labels: (
                (metric is self._f.threshold and labels[0] not in thresholds)
                or (metric is self._f.interval and spec.interval_seconds is None)
            ),
        )
        for name, threshold in thresholds.items():
            self._child(self._f.threshold, pair, name).set(threshold)
        if spec.interval_seconds is not None:
            self._child(self._f.interval, pair).set(spec.interval_seconds)

    def _load_slo(self, pair: Pair, slo: Objective | None) -> None:
        """The SLO's counters at 0 (kept across reloads) and its objective; none without one."""
        families = (
            self._f.slo_events,
            self._f.slo_good,
            self._f.slo_objective,
            self._f.slo_remaining,
            self._f.slo_burn,
        )
        if slo is None:
            self._remove(pair, lambda metric, labels: metric in families)
            return
        self._child(self._f.slo_events, pair)
        self._child(self._f.slo_good, pair)
        self._child(self._f.slo_objective, pair).set(slo.objective)

    def set_budget(
        self, suite: str, target: str, remaining: float | None, burn: Mapping[str, float | None]
    ) -> None:
        """Show a pair's error budget left and burn rates (None: no event, the series goes)."""
        pair = (suite, target)
        layout = self._layouts.get(pair)
        if layout is None or layout.good is None:
            return  # a pair or SLO a reload removed meanwhile
        values: dict[Setting, float | None] = {(self._f.slo_remaining, ()): remaining}
        values.update({(self._f.slo_burn, (window,)): rate for window, rate in burn.items()})
        self._remove(
            pair,
            lambda metric, labels: (
                metric in (self._f.slo_remaining, self._f.slo_burn)
                and values.get((metric, labels)) is None
            ),
        )
        for (gauge, labels), value in values.items():
            if value is not None:
                self._child(gauge, pair, *labels).set(value)
        self._pairs[pair].families()

    def observe_run(self, report: RunReport, *, counted: bool = True) -> None:
        """Account one run from its report.

        ``counted=False`` (a run another replica ran) sets the gauges only: counters and
        histograms count what this process did, and rules sum them over replicas.

        An ``unavailable`` run moves only coverage, counters, durations and the last-run time:
        the quality gauges keep what the last answered run measured, because an outage says
        nothing about retrieval quality. Reports of pairs not loaded (a run that finished
        after a reload removed its suite) are ignored so removed series stay removed.
        """
        pair = report.pair
        layout = self._layouts.get(pair)
        if layout is None:
            return
        outcome = report.outcome
        if counted:
            self._count(pair, report)
        if report.coverage is not None:
            self._child(self._f.coverage, pair).set(report.coverage)
        finished = _finished_at(report)
        self._child(self._f.last_run, pair).set(finished)
        if outcome in ("ok", "regression"):
            self._child(self._f.last_success, pair).set(finished)
            self._observe_quality(pair, layout, report)
        if outcome in RUN_OUTCOMES:
            # Answers its config cannot read are no outage: the alerts tell them apart by this.
            named = report.diagnosis.cause if report.diagnosis is not None else None
            if named is None and outcome == "unavailable":  # a report older than the diagnosis
                named = "config" if report.config_failure() else "outage"
            for cause in CAUSES:
                self._child(self._f.diagnosis, pair, cause).set(1 if cause == named else 0)
        # The pair's text is rendered now, as its run ends, not by the next scrape: at 200
        # pairs a scrape would otherwise render every pair that ran since the one before, tens
        # of milliseconds on a busy event loop (docs/performance.md, "Scale of one daemon").
        self._pairs[pair].families()

    def _count(self, pair: Pair, report: RunReport) -> None:
        if report.outcome in RUN_OUTCOMES:
            self._child(self._f.runs, pair, report.outcome).inc()
        for query_outcome, count in _query_counts(report).items():
            if query_outcome in OUTCOMES and count > 0:
                self._child(self._f.queries, pair, query_outcome).inc(count)
        for case in report.cases:
            latency = case.latency_s
            if latency is not None and latency >= 0 and case.answered:
                self._child(self._f.query_duration, pair).observe(latency)
        duration = report.duration_s
        if duration is not None and duration >= 0:
            self._child(self._f.run_duration, pair).observe(duration)
        good = self._layouts[pair].good
        if good is not None:
            counted = run_events(report, good)
            self._child(self._f.slo_events, pair).inc(counted.events)
            self._child(self._f.slo_good, pair).inc(counted.good)

    def exposition(self) -> bytes:
        """What ``generate_latest(self.registry)`` renders, re-rendering only changed pairs."""
        return join_text(generate_latest(self._base), list(self._pairs.values()))

    def count_overlap(self, suite: str, target: str) -> None:
        """Count a scheduled run skipped because the previous one of its job still ran."""
        if (suite, target) in self._layouts:
            self._child(self._f.skipped, (suite, target)).inc()

    def set_maintenance(self, pairs: Iterable[Pair]) -> None:
        """``ragcanary_maintenance``: 1 for ``pairs`` (inside a change window), 0 for the others."""
        held = frozenset(pairs)
        if held == self._maintenance:
            return  # unchanged: no pair's text rendered again
        for pair in self._layouts:
            if (pair in held) != (pair in self._maintenance):
                self._child(self._f.maintenance, pair).set(1 if pair in held else 0)
        self._maintenance = held

    def set_buffered_runs(self, runs: int) -> None:
        """Record how many runs wait for storage."""
        self._p.buffered.set(runs)

    def set_storage_bytes(self, size: int) -> None:
        """Record the bytes the store holds; the series appears with the first measurement."""
        if not self._storage_measured:
            self._base.register(self._p.storage_bytes)
            self._storage_measured = True
        self._p.storage_bytes.set(size)

    def count_storage_error(self, operation: str) -> None:
        """Count one failed storage call (``operation``: read, write or check), or one line or
        file of the spool that could not be read (``spool``)."""
        self._p.storage_errors.labels(operation).inc()

    def count_candidate(self, signal: str) -> None:
        """Count one failure report taken (``signal``: thumbs_down, rephrased, ...)."""
        self._p.candidates_received.labels(signal).inc()

    def count_dropped_candidates(self, reason: str, count: int = 1) -> None:
        """Count failure reports refused or dropped for ``reason``."""
        self._p.candidates_dropped.labels(reason).inc(count)

    def set_candidates_pending(self, by_signal: Mapping[str, int]) -> None:
        """How many candidates wait for review, per signal they were reported with."""
        for signal in CANDIDATE_SIGNALS:
            self._p.candidates_pending.labels(signal).set(by_signal.get(signal, 0))

    def load_judges(self, judges: Iterable[str]) -> None:
        """Lay out ``ragcanary_judge_errors_total`` at 0 for each judge of the config; a
        judge no longer configured loses its series."""
        wanted = set(judges)
        for labels in list(self._judge_errors):
            if labels[0] not in wanted:
                self._p.judge_errors.remove(*labels)
                self._judge_errors.discard(labels)
        for judge in sorted(wanted):
            for reason in JUDGE_ERRORS:
                self._p.judge_errors.labels(judge, reason)
                self._judge_errors.add((judge, reason))

    def count_judge_error(self, judge: str, reason: str, count: int = 1) -> None:
        """Count ``count`` documents ``judge`` did not grade, for ``reason`` (JUDGE_ERRORS)."""
        self._p.judge_errors.labels(judge, reason).inc(count)
        self._judge_errors.add((judge, reason))

    def set_judgments_pending(self, count: int) -> None:
        """How many proposed judgments wait for review."""
        self._p.judgments_pending.set(count)

    def set_reload_result(self, ok: bool) -> None:
        """Record whether the last configuration reload was accepted."""
        self._p.reload_ok.set(1 if ok else 0)

    def _observe_quality(
        self,
        pair: Pair,
        layout: _Layout,
        report: RunReport,
    ) -> None:
        values = {
            series: value
            for series, value in self._quality(report)
            if value is not None and self._fits(layout, *series)
        }
        # An answered run states the whole quality picture: what it does not measure (no
        # baseline any more, a metric with no labelled case answered) must not linger.
        self._remove(pair, lambda m, labels: m in self._f.aggregates and (m, labels) not in values)
        for case in report.cases:
            values.update(self._case_values(layout, case))
        for (metric, labels), value in values.items():
            self._child(metric, pair, *labels).set(value)

    def _quality(self, report: RunReport) -> Iterable[tuple[Setting, float | None]]:
        for key, value in report.metrics.items():
            name, _, k = key.partition("@")
            if k and name in self._f.cut_off:
                yield (self._f.cut_off[name], (k,)), value
            elif key == "mrr":
                yield (self._f.mrr, ()), value
        yield (self._f.top_score, ()), _mean_top_score(report.cases)
        leaks = {f.case for f in report.failures if f.kind == "negative_leak"}
        yield (self._f.leaks, ()), float(len(leaks))
        yield (self._f.regression, ()), 1.0 if report.outcome == "regression" else 0.0
        yield (self._f.lost_documents, ()), _lost_documents(report)
        yield from _ann_recall(self._f.ann_recall, report)
        short = report.counts.short
        yield (self._f.short, ()), None if isinstance(short, Absent) else float(short)
        if not isinstance(report.endpoints, Absent):
            for name, endpoint in report.endpoints.items():  # None (answered nothing): removed
                yield (self._f.endpoint_overlap, (name,)), endpoint.rbo_min
        if isinstance(report.stale_labels, tuple):  # None: not enough runs yet to tell
            yield (self._f.stale_labels, ()), float(len(report.stale_labels))
        baseline = report.baseline
        if baseline is None:
            return
        yield (self._f.rank_overlap, ()), baseline.rank_overlap
        yield (self._f.score_drift, ()), baseline.score_drift
        yield (self._f.drifted_ratio, ()), baseline.score_drifted_ratio
        yield (self._f.embedding_drift, ()), baseline.embedding_drift
        yield (self._f.embedding_changed, ()), baseline.embedding_changed_ratio
        for metric, delta in baseline.deltas.items():
            yield (self._f.baseline_delta, (metric,)), delta
        yield (self._f.regressed, ()), float(len({r.case for r in report.regressions}))

    def _case_values(self, layout: _Layout, case: CaseEntry) -> dict[Setting, float]:
        case_id = case.id
        if case_id not in layout.cases:
            return {}
        values: dict[Setting, float] = {}
        for key, value in case.metrics.items():
            name, _, k = key.partition("@")
            if value is None:
                continue
            if name == "hit_rate" and k in layout.ks:
                values[(self._f.case_hit_rate, (case_id, k))] = value
            elif key == "rr":
                values[(self._f.case_rr, (case_id,))] = value
        return values

    def _fits(self, layout: _Layout, metric: MetricWrapperBase, labels: Labels) -> bool:
        """Whether a series still belongs to the configuration in ``layout``."""
        if metric in self._f.cut_off.values():
            return labels[0] in layout.ks
        if metric is self._f.baseline_delta:
            _, at, k = labels[0].partition("@")
            return not at or k in layout.ks
        if metric is self._f.case_hit_rate:
            return labels[0] in layout.cases and labels[1] in layout.ks
        if metric is self._f.case_rr:
            return labels[0] in layout.cases
        return True

    def _child(self, metric: M, pair: Pair, *labels: str) -> M:
        """The labelled child of ``metric`` for ``pair``, remembered so reloads can remove it."""
        self._series.setdefault(pair, set()).add((metric, labels))
        series = self._pairs[pair]
        series.changed()  # the caller is about to set it
        return cast(M, series.metrics[metric]).labels(*pair, *labels)

    def _prune(self, pair: Pair, layout: _Layout) -> None:
        """Remove the series of ``pair`` that a reload took out of its configuration."""
        self._remove(pair, lambda metric, labels: not self._fits(layout, metric, labels))

    def _remove(self, pair: Pair, doomed: Callable[[MetricWrapperBase, Labels], bool]) -> None:
        owned = self._series.get(pair, set())
        series = self._pairs[pair]
        for metric, labels in [s for s in owned if doomed(*s)]:
            series.metrics[metric].remove(*pair, *labels)
            series.changed()
            owned.discard((metric, labels))


def _ann_recall(family: Gauge, report: RunReport) -> Iterable[tuple[Setting, float | None]]:
    """``ragcanary_ann_recall{k}``: the run's, under the depth it was measured at."""
    recall = report.diagnosis.ann_recall if report.diagnosis is not None else None
    if isinstance(recall, AnnRecall):
        yield (family, (str(recall.k),)), recall.value


def _lost_documents(report: RunReport) -> float | None:
    """Judged relevant ids the index said it no longer holds; None (the series removed) when
    ids left their top-k and the index could not be asked, or the report predates the count."""
    diagnosis = report.diagnosis
    if diagnosis is None:
        return None
    # Every lost id counts under one cause that names it; causes seen without labels (short
    # answers, a diverging endpoint) name no id.
    if any(c.ids for c in diagnosis.causes) and not diagnosis.checked.index_lookup:
        return None
    gone = next((c.ids for c in diagnosis.causes if c.cause == "index_lost"), ())
    return float(len(gone))


def _query_counts(report: RunReport) -> Mapping[str, int]:
    """Queries per outcome: the report's own counts, else counted from its cases."""
    if report.counts.outcomes:
        return report.counts.outcomes
    return Counter(case.outcome for case in report.cases)


def _mean_top_score(cases: Iterable[CaseEntry]) -> float | None:
    """Mean top-1 score of the answered cases that returned a scored first hit."""
    tops = [
        top
        for case in cases
        if case.answered and case.scores
        for top in [case.scores[0]]
        if top is not None
    ]
    return sum(tops) / len(tops) if tops else None


def _finished_at(report: RunReport) -> float:
    """Unix time the run finished: its start plus its duration."""
    at = report.finished_at()
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)  # reports are written in UTC
    return at.timestamp()
