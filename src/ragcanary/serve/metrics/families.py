"""The daemon's metric families (docs/metrics.md): each pair's templates, and the process's."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from ragcanary.measure.diagnosis import CAUSES as DIAGNOSIS_CAUSES

# A healthy retriever answers in tens of milliseconds; the top buckets catch timeouts (5 s default).
QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RUN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# spool: a line or file of the spool that a start could not read (skipped, kept as .bad).
STORAGE_OPERATIONS = ("read", "write", "check", "spool")
# serve/intake/queue.py's signals and the reasons it refuses or drops a report for.
CANDIDATE_SIGNALS = ("thumbs_down", "rephrased", "abandoned", "other")
# The causes of ragcanary_diagnosis: the report's diagnosis.cause vocabulary (docs/report.md).
CAUSES = DIAGNOSIS_CAUSES
CANDIDATE_DROPS = ("invalid", "too_large", "rate_limited", "queue_full", "cap", "unstorable")
# Why a judge graded no document (serve/grading/): the request's outcome, an answer without a
# grade (unparseable), no text to grade (no_text), the grading queue full, storage down.
JUDGE_ERRORS = (
    "timeout",
    "connect_error",
    "http_4xx",
    "http_5xx",
    "rate_limited",
    "bad_response",
    "unparseable",
    "no_text",
    "queue_full",
    "storage",
)
M = TypeVar("M", bound=MetricWrapperBase)


class PairFamilies:
    """Every family with a series per (suite, target): templates registered nowhere, and in
    ``factories`` the way to make each pair's copy in the pair's own registry."""

    def __init__(self) -> None:
        self.factories: dict[MetricWrapperBase, Callable[[CollectorRegistry], Any]] = {}
        self.cut_off = {
            "hit_rate": self._gauge("hit_rate", "Weighted Hit@k of the last answered run.", "k"),
            "ndcg": self._gauge("ndcg", "Weighted NDCG@k of the last answered run.", "k"),
            "recall": self._gauge("recall", "Weighted Recall@k of the last answered run.", "k"),
            "precision": self._gauge(
                "precision", "Weighted Precision@k of the last answered run.", "k"
            ),
            # The report's judged@k, under the name of what it is: a ratio of the top-k.
            "judged": self._gauge(
                "judged_ratio",
                "Weighted share of the top-k ids that carry a judgment (Judged@k) in the last"
                " answered run.",
                "k",
            ),
        }
        self.mrr = self._gauge("mrr", "Weighted mean reciprocal rank of the last answered run.")
        self.rank_overlap = self._gauge("rank_overlap", "Mean RBO of the top-k vs the baseline.")
        self.score_drift = self._gauge(
            "score_drift", "Mean absolute score delta of ids in both the run and the baseline."
        )
        self.drifted_ratio = self._gauge(
            "score_drifted_ratio", "Share of (case, id) pairs whose score moved over the threshold."
        )
        self.top_score = self._gauge("top_score", "Mean top-1 score of the answered cases.")
        self.embedding_drift = self._gauge(
            "embedding_drift", "1 - mean cosine of the query vectors with the baseline's."
        )
        self.embedding_changed = self._gauge(
            "embedding_changed_ratio",
            "Share of canaries whose query vector moved (cosine < 0.999).",
        )
        self.baseline_delta = self._gauge(
            "baseline_delta", "Aggregate metric of the last run minus the baseline's.", "metric"
        )
        self.regressed = self._gauge(
            "regressed_cases", "Cases that scored worse than in the baseline."
        )
        self.stale_labels = self._gauge(
            "stale_labels", "Relevant ids no canary got back in the suite's stale_label_runs."
        )
        self.leaks = self._gauge(
            "negative_leaks", "Negative canaries that scored at or over max_score."
        )
        self.regression = self._gauge(
            "regression", "1 when the last answered run was a regression."
        )
        self.coverage = self._gauge(
            "coverage_ratio", "Answered cases over all cases of the last run."
        )
        self.runs = self._per_pair(
            Counter,
            "ragcanary_runs_total",
            "Runs by outcome (ok, regression, unavailable).",
            "outcome",
        )
        self.skipped = self._per_pair(
            Counter,
            "ragcanary_runs_skipped_total",
            "Scheduled runs skipped because the previous run of the job was still going.",
        )
        self.queries = self._per_pair(
            Counter, "ragcanary_queries_total", "Canary queries by outcome.", "outcome"
        )
        self.query_duration = self._per_pair(
            Histogram,
            "ragcanary_query_duration_seconds",
            "Latency of answered canary queries.",
            buckets=QUERY_BUCKETS,
        )
        self.run_duration = self._per_pair(
            Histogram,
            "ragcanary_run_duration_seconds",
            "Wall time of a whole run.",
            buckets=RUN_BUCKETS,
        )
        self.last_run = self._gauge("last_run_timestamp_seconds", "When the last run finished.")
        self.last_success = self._gauge(
            "last_success_timestamp_seconds", "When the last run that was not unavailable finished."
        )
        self.case_hit_rate = self._gauge(
            "case_hit_rate", "Hit@k of one canary in its last answered run.", "case", "k"
        )
        self.case_rr = self._gauge(
            "case_rr", "Reciprocal rank of one canary in its last answered run.", "case"
        )
        self.case_dropped = self._gauge(
            "case_series_dropped", "Per-case series not exported because of the per-case cap."
        )
        self.threshold = self._gauge(
            "threshold", "A threshold of the suite's verdict (max_drop, floors, ...).", "name"
        )
        self.lost_documents = self._gauge(
            "lost_documents",
            "Judged relevant ids of the last answered run that left their canary's top-k and"
            " that the index, asked in that run, no longer holds.",
        )
        self.short = self._gauge(
            "result_count_short",
            "Canaries of the last answered run answered with fewer results than the suite's"
            " depth (a filter or a shrinking index).",
        )
        self.ann_recall = self._gauge(
            "ann_recall",
            "The approximate search's recall at depth k in the last answered run: of the judged"
            " relevant ids the baseline returned and the index still holds, the share it did not"
            " miss (absent when that cannot be told).",
            "k",
        )
        self.diagnosis = self._gauge(
            "diagnosis",
            "1 for the cause the last run names (its report's diagnosis.cause: none, outage,"
            " config, index_lost, ...), 0 for the others.",
            "cause",
        )
        self.endpoint_overlap = self._gauge(
            "endpoint_overlap",
            "Lowest RBO of an endpoint's answer to a canary against the target's url's answer,"
            " in the last answered run (targets with endpoints:).",
            "endpoint",
        )
        self.maintenance = self._gauge(
            "maintenance",
            "1 while a declared change's window is open for the pair's target (its alerts are"
            " held), 0 otherwise.",
        )
        self.interval = self._gauge(
            "interval_seconds", "The schedule's interval between runs (cron: the median gap)."
        )
        # The suite's quality SLO (docs/slo.md): this replica's events, and the objective.
        self.slo_events = self._per_pair(
            Counter,
            "ragcanary_slo_events_total",
            "Answered labelled canaries of answered runs this replica judged for the suite's SLO.",
        )
        self.slo_good = self._per_pair(
            Counter,
            "ragcanary_slo_good_total",
            "The SLO events whose good metric was 1 (or at least the SLO's floor).",
        )
        self.slo_objective = self._gauge(
            "slo_objective", "The suite's SLO objective: the share of events promised good."
        )
        self.slo_remaining = self._gauge(
            "slo_budget_remaining",
            "Share of the SLO's error budget left over its window, from the stored runs (1"
            " untouched, below 0 overspent; absent while the window holds no event).",
        )
        self.slo_burn = self._gauge(
            "slo_burn_rate",
            "How many times as fast as the SLO allows the budget went over the window, from"
            " the stored runs (absent while the window holds no event).",
            "window",
        )
        self.aggregates: frozenset[MetricWrapperBase] = frozenset(
            {
                *self.cut_off.values(),
                self.mrr,
                self.rank_overlap,
                self.score_drift,
                self.drifted_ratio,
                self.top_score,
                self.embedding_drift,
                self.embedding_changed,
                self.baseline_delta,
                self.regressed,
                self.leaks,
                self.regression,
                self.stale_labels,
                self.lost_documents,
                self.short,
                self.endpoint_overlap,
                self.ann_recall,
            }
        )

    def _per_pair(self, kind: type[M], name: str, doc: str, *labels: str, **options: Any) -> M:
        make = partial(kind, name, doc, ("suite", "target", *labels), **options)
        template = make(registry=None)
        self.factories[template] = lambda registry: make(registry=registry)
        return template

    def _gauge(self, name: str, doc: str, *extra: str) -> Gauge:
        return self._per_pair(Gauge, f"ragcanary_{name}", doc, *extra)


class ProcessFamilies:
    """The families of the process as a whole (build, reloads, storage, failure reports)."""

    def __init__(self, registry: CollectorRegistry, version: str) -> None:
        self.reload_ok = Gauge(
            "ragcanary_config_last_reload_successful",
            "1 when the last configuration reload was accepted.",
            registry=registry,
        )
        # The process only starts with a valid configuration.
        self.reload_ok.set(1)
        build = Gauge(
            "ragcanary_build_info",
            "Always 1; the version is a label.",
            ("version",),
            registry=registry,
        )
        build.labels(version).set(1)
        self.buffered = Gauge(
            "ragcanary_storage_buffered_runs",
            "Runs waiting in memory (or the spool) for storage to accept them.",
            registry=registry,
        )
        # Registered by the first measurement (Exporter.set_storage_bytes): a size not yet
        # measured is absent, never a 0 that reads as an empty store.
        self.storage_bytes = Gauge(
            "ragcanary_storage_bytes",
            "Bytes the store holds: the SQLite database and its WAL, or the store's PostgreSQL "
            "tables with their indexes.",
            registry=None,
        )
        self.storage_errors = Counter(
            "ragcanary_storage_errors_total",
            "Storage reads and writes that failed (unreachable, read-only, timed out).",
            ("operation",),
            registry=registry,
        )
        for operation in STORAGE_OPERATIONS:
            self.storage_errors.labels(operation)
        self.candidates_pending = Gauge(
            "ragcanary_candidates_pending",
            "Failure reports waiting for review, by a signal they were reported with.",
            ("signal",),
            registry=registry,
        )
        self.candidates_received = Counter(
            "ragcanary_candidates_received_total",
            "Failure reports taken from the application, by signal.",
            ("signal",),
            registry=registry,
        )
        self.candidates_dropped = Counter(
            "ragcanary_candidates_dropped_total",
            "Failure reports refused or dropped, by reason.",
            ("reason",),
            registry=registry,
        )
        for signal in CANDIDATE_SIGNALS:
            self.candidates_received.labels(signal)
            self.candidates_pending.labels(signal).set(0)
        for reason in CANDIDATE_DROPS:
            self.candidates_dropped.labels(reason)
        self.judgments_pending = Gauge(
            "ragcanary_judgments_pending",
            "Judgments a judge proposed that wait for a person to accept or reject them.",
            registry=registry,
        )
        self.judge_errors = Counter(
            "ragcanary_judge_errors_total",
            "Documents a judge was to grade and did not, by judge and reason.",
            ("judge", "reason"),
            registry=registry,
        )
        self.config_hash = Gauge(
            "ragcanary_config_hash",
            "Always 1; the hash of the effective configuration (secrets left out) is a label.",
            ("hash",),
            registry=registry,
        )
        self.ui_info = Gauge(
            "ragcanary_ui_info",
            "Always 1; the base URL of the web pages (ui_url) is a label, for alert and dashboard"
            " links.",
            ("url",),
            registry=registry,
        )
        self.runbook_info = Gauge(
            "ragcanary_runbook_info",
            "Always 1; where alerts link their runbooks (runbook_base_url) is a label; without"
            " it, they link /ui/runbooks/ at ui_url.",
            ("url",),
            registry=registry,
        )
