"""The Prometheus exporter: contract names, series at 0, the outage rule, reloads, per-case caps."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from factories import answer, case, report_data, run
from factories import case_entry as report_case
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from ragcanary.measure.diagnosis import CauseEvidence, Diagnosis
from ragcanary.measure.drift import compare_runs
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.lost_ids import AnnRecall
from ragcanary.measure.report_json import unmarshal
from ragcanary.measure.results import OUTCOMES
from ragcanary.measure.run_report import (
    ABSENT,
    Absent,
    RunReport,
    StaleLabelEntry,
    build_report,
)
from ragcanary.measure.scoring import score_run
from ragcanary.measure.verdict import Policy, judge
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs, per_case_admission
from ragcanary.serve.metrics.families import QUERY_BUCKETS, RUN_BUCKETS

# Metric names of docs/metrics.md.
CONTRACT_METRICS = (
    "ragcanary_hit_rate",
    "ragcanary_mrr",
    "ragcanary_ndcg",
    "ragcanary_recall",
    "ragcanary_precision",
    "ragcanary_rank_overlap",
    "ragcanary_score_drift",
    "ragcanary_score_drifted_ratio",
    "ragcanary_top_score",
    "ragcanary_baseline_delta",
    "ragcanary_regressed_cases",
    "ragcanary_negative_leaks",
    "ragcanary_regression",
    "ragcanary_coverage_ratio",
    "ragcanary_runs_total",
    "ragcanary_queries_total",
    "ragcanary_query_duration_seconds",
    "ragcanary_run_duration_seconds",
    "ragcanary_last_run_timestamp_seconds",
    "ragcanary_last_success_timestamp_seconds",
    "ragcanary_config_last_reload_successful",
    "ragcanary_build_info",
    "ragcanary_embedding_drift",
    "ragcanary_embedding_changed_ratio",
    "ragcanary_stale_labels",
    "ragcanary_result_count_short",
    "ragcanary_ann_recall",
    "ragcanary_candidates_pending",
    "ragcanary_candidates_received_total",
    "ragcanary_candidates_dropped_total",
    "ragcanary_judged_ratio",
)
CORE = {"suite": "core", "target": "search"}
QUALITY: tuple[tuple[str, dict[str, str]], ...] = (
    ("ragcanary_hit_rate", {"k": "5"}),
    ("ragcanary_ndcg", {"k": "5"}),
    ("ragcanary_recall", {"k": "5"}),
    ("ragcanary_precision", {"k": "5"}),
    ("ragcanary_judged_ratio", {"k": "5"}),
    ("ragcanary_mrr", {}),
    ("ragcanary_rank_overlap", {}),
    ("ragcanary_score_drift", {}),
    ("ragcanary_score_drifted_ratio", {}),
    ("ragcanary_top_score", {}),
    ("ragcanary_embedding_drift", {}),
    ("ragcanary_embedding_changed_ratio", {}),
    ("ragcanary_baseline_delta", {"metric": "hit_rate@5"}),
    ("ragcanary_regressed_cases", {}),
    ("ragcanary_negative_leaks", {}),
    ("ragcanary_regression", {}),
)


def pairs(
    *targets: str,
    ks: tuple[int, ...] = (1, 5),
    per_case: bool = False,
    case_ids: tuple[str, ...] = ("c1", "c2", "neg"),
) -> dict[str, SuitePairs]:
    return {"core": SuitePairs(targets or ("search",), tuple(ks), per_case, tuple(case_ids))}


def case_entry(
    case_id: str,
    outcome: str = "ok",
    scores: tuple[float, ...] = (),
    latency: float = 0.02,
    **metrics: float,
) -> dict[str, Any]:
    """One entry of a report's ``cases``; metric names use ``_at_`` for ``@``."""
    return report_case(
        case_id,
        outcome=outcome,
        ids=[f"d-{case_id}-{i}" for i in range(len(scores))],
        scores=scores,
        latency_s=latency,
        error=None if outcome == "ok" else f"simulated {outcome}",
        metrics={name.replace("_at_", "@"): v for name, v in metrics.items()},
    )


DEFAULT_CASES = [
    case_entry("c1", scores=(0.9, 0.5), latency=0.02, hit_rate_at_1=1.0, hit_rate_at_5=1.0, rr=1.0),
    case_entry("c2", scores=(0.7, 0.6), latency=0.3, hit_rate_at_1=0.0, hit_rate_at_5=0.0, rr=0.0),
    case_entry("neg", "timeout", latency=5.0),
]
BASELINE = {
    "run_id": "base",
    "deltas": {"hit_rate@5": -0.5, "mrr": -0.25},
    "rank_overlap": 0.8,
    "score_drift": 0.07,
    "score_drifted_ratio": 0.2,
    "embedding_drift": 0.06,
    "embedding_changed_ratio": 0.75,
}


def make_report(outcome: str = "ok", **options: Any) -> RunReport:
    """A report as ``ragcanary.measure.run_report.build_report`` makes one."""
    return unmarshal(make_report_data(outcome, **options))


def make_report_data(
    outcome: str = "ok",
    *,
    target: str = "search",
    coverage: float = 1.0,
    baseline: bool = True,
    hit_rate: float = 0.5,
    cases: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``make_report``'s report as JSON, for a test to edit before reading it back."""
    return report_data(
        f"run-{outcome}",
        target=target,
        started_at="2026-11-22T10:00:00+00:00",
        duration_s=1.5,
        outcome=outcome,
        coverage=coverage,
        metrics={
            "hit_rate@1": 0.25,
            "hit_rate@5": hit_rate,
            "ndcg@5": 0.4,
            "recall@5": 0.45,
            "precision@5": 0.1,
            "map@5": 0.3,
            "judged@1": 0.75,
            "judged@5": 0.35,
            "mrr": 0.6,
            "bpref": 0.55,
        },
        baseline=BASELINE if baseline else None,
        failures=[
            {"kind": "negative_leak", "metric": None, "case": "neg", "message": "leak"},
            {"kind": "drop", "metric": "hit_rate@5", "case": None, "message": "drop"},
        ],
        regressions=[
            {"case": "c2", "metric": "hit_rate@5", "baseline": 1.0, "current": 0.0},
            {"case": "c2", "metric": "rr", "baseline": 1.0, "current": 0.0},
        ],
        cases=DEFAULT_CASES if cases is None else cases,
    )


def value(exporter: Exporter, name: str, **labels: str) -> float | None:
    return exporter.registry.get_sample_value(name, {**CORE, **labels})


@pytest.fixture
def exporter() -> Exporter:
    exporter = Exporter(CollectorRegistry(), version="1.2.3")
    exporter.load(pairs())
    return exporter


def test_default_registry_is_a_fresh_one_not_the_global() -> None:
    first, second = Exporter(), Exporter()
    assert first.registry is not REGISTRY
    assert first.registry is not second.registry
    assert REGISTRY.get_sample_value("ragcanary_build_info", {"version": "0.1.0"}) is None


@pytest.mark.parametrize("outcome", ["ok", "regression", "unavailable"])
def test_load_creates_every_run_outcome_counter_at_zero(exporter: Exporter, outcome: str) -> None:
    assert value(exporter, "ragcanary_runs_total", outcome=outcome) == 0.0


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_load_creates_every_query_outcome_counter_at_zero(exporter: Exporter, outcome: str) -> None:
    assert value(exporter, "ragcanary_queries_total", outcome=outcome) == 0.0


@pytest.mark.parametrize(
    "histogram", ["ragcanary_query_duration_seconds", "ragcanary_run_duration_seconds"]
)
def test_load_creates_histograms_with_no_observations(exporter: Exporter, histogram: str) -> None:
    assert value(exporter, f"{histogram}_count") == 0.0
    assert value(exporter, f"{histogram}_bucket", le="+Inf") == 0.0


@pytest.mark.parametrize(("name", "labels"), QUALITY)
def test_quality_gauges_are_absent_before_the_first_run(
    exporter: Exporter, name: str, labels: dict[str, str]
) -> None:
    """A 0 before anything was measured would look like a total outage of quality."""
    assert value(exporter, name, **labels) is None


def test_build_info_is_one_with_the_version_and_reload_starts_successful(
    exporter: Exporter,
) -> None:
    assert exporter.registry.get_sample_value("ragcanary_build_info", {"version": "1.2.3"}) == 1.0
    assert exporter.registry.get_sample_value("ragcanary_config_last_reload_successful") == 1.0


@pytest.mark.parametrize(("ok", "expected"), [(False, 0.0), (True, 1.0)])
def test_reload_result_is_exported(exporter: Exporter, ok: bool, expected: float) -> None:
    exporter.set_reload_result(not ok)
    exporter.set_reload_result(ok)
    assert exporter.registry.get_sample_value("ragcanary_config_last_reload_successful") == expected


@pytest.mark.parametrize(
    ("name", "labels", "expected"),
    [
        ("ragcanary_hit_rate", {"k": "5"}, 0.5),
        ("ragcanary_hit_rate", {"k": "1"}, 0.25),
        ("ragcanary_ndcg", {"k": "5"}, 0.4),
        ("ragcanary_recall", {"k": "5"}, 0.45),
        ("ragcanary_precision", {"k": "5"}, 0.1),
        ("ragcanary_judged_ratio", {"k": "5"}, 0.35),
        ("ragcanary_judged_ratio", {"k": "1"}, 0.75),
        ("ragcanary_mrr", {}, 0.6),
        ("ragcanary_rank_overlap", {}, 0.8),
        ("ragcanary_score_drift", {}, 0.07),
        ("ragcanary_score_drifted_ratio", {}, 0.2),
        ("ragcanary_embedding_drift", {}, 0.06),
        ("ragcanary_embedding_changed_ratio", {}, 0.75),
        ("ragcanary_top_score", {}, 0.8),  # mean of 0.9 and 0.7; the timed-out case is left out
        ("ragcanary_baseline_delta", {"metric": "hit_rate@5"}, -0.5),
        ("ragcanary_baseline_delta", {"metric": "mrr"}, -0.25),
        ("ragcanary_regressed_cases", {}, 1.0),  # one case, two metrics
        ("ragcanary_negative_leaks", {}, 1.0),
        ("ragcanary_regression", {}, 1.0),
        ("ragcanary_coverage_ratio", {}, 2 / 3),
        ("ragcanary_runs_total", {"outcome": "regression"}, 1.0),
        ("ragcanary_runs_total", {"outcome": "ok"}, 0.0),
        ("ragcanary_queries_total", {"outcome": "ok"}, 2.0),
        ("ragcanary_queries_total", {"outcome": "timeout"}, 1.0),
        ("ragcanary_query_duration_seconds_count", {}, 2.0),  # answered cases only
        ("ragcanary_query_duration_seconds_sum", {}, 0.32),
        ("ragcanary_query_duration_seconds_bucket", {"le": "0.025"}, 1.0),
        ("ragcanary_run_duration_seconds_count", {}, 1.0),
        ("ragcanary_run_duration_seconds_sum", {}, 1.5),
        ("ragcanary_last_run_timestamp_seconds", {}, 1795341601.5),  # started_at + duration
        ("ragcanary_last_success_timestamp_seconds", {}, 1795341601.5),
    ],
)
def test_a_run_sets_every_series_to_the_reports_value(
    exporter: Exporter, name: str, labels: dict[str, str], expected: float
) -> None:
    exporter.observe_run(make_report("regression", coverage=2 / 3))
    assert value(exporter, name, **labels) == pytest.approx(expected)


def test_an_ok_run_exports_no_regression(exporter: Exporter) -> None:
    exporter.observe_run(make_report("ok"))
    assert value(exporter, "ragcanary_regression") == 0.0
    assert value(exporter, "ragcanary_runs_total", outcome="ok") == 1.0


def test_metrics_outside_the_contract_and_configured_ks_are_not_exported(
    exporter: Exporter,
) -> None:
    exporter.observe_run(make_report())
    text = generate_latest(exporter.registry).decode()
    assert "map" not in re.sub(r"#.*", "", text)
    assert "bpref" not in re.sub(r"#.*", "", text)
    assert value(exporter, "ragcanary_ndcg", k="10") is None


@pytest.mark.parametrize(("name", "labels"), QUALITY)
def test_an_unavailable_run_keeps_every_quality_gauge(
    exporter: Exporter, name: str, labels: dict[str, str]
) -> None:
    exporter.observe_run(make_report("regression"))
    before = value(exporter, name, **labels)
    outage = make_report("unavailable", coverage=0.0, hit_rate=0.0, baseline=False, cases=[])
    exporter.observe_run(outage)
    assert before is not None
    assert value(exporter, name, **labels) == before


def test_an_unavailable_run_moves_coverage_counters_and_last_run_only(exporter: Exporter) -> None:
    exporter.observe_run(make_report("ok"))
    timeouts = [case_entry(c, "timeout", latency=5.0) for c in ("c1", "c2", "neg")]
    outage = make_report("unavailable", coverage=0.0, hit_rate=0.0, cases=timeouts)
    outage = replace(outage, started_at=datetime(2026, 11, 22, 11, 0, tzinfo=UTC))
    exporter.observe_run(outage)
    assert value(exporter, "ragcanary_hit_rate", k="5") == 0.5
    assert value(exporter, "ragcanary_coverage_ratio") == 0.0
    assert value(exporter, "ragcanary_runs_total", outcome="unavailable") == 1.0
    assert value(exporter, "ragcanary_runs_total", outcome="ok") == 1.0
    assert value(exporter, "ragcanary_queries_total", outcome="timeout") == 4.0
    assert value(exporter, "ragcanary_query_duration_seconds_count") == 2.0
    assert value(exporter, "ragcanary_run_duration_seconds_count") == 2.0
    assert value(exporter, "ragcanary_last_run_timestamp_seconds") == 1795345201.5
    assert value(exporter, "ragcanary_last_success_timestamp_seconds") == 1795341601.5


def test_an_outage_before_any_answered_run_leaves_quality_absent(exporter: Exporter) -> None:
    exporter.observe_run(make_report("unavailable", coverage=0.0, cases=[]))
    assert value(exporter, "ragcanary_hit_rate", k="5") is None
    assert value(exporter, "ragcanary_last_success_timestamp_seconds") is None
    assert value(exporter, "ragcanary_coverage_ratio") == 0.0


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("ragcanary_rank_overlap", {}),
        ("ragcanary_score_drift", {}),
        ("ragcanary_score_drifted_ratio", {}),
        ("ragcanary_embedding_drift", {}),
        ("ragcanary_embedding_changed_ratio", {}),
        ("ragcanary_baseline_delta", {"metric": "hit_rate@5"}),
        ("ragcanary_regressed_cases", {}),
    ],
)
def test_baseline_gauges_exist_only_while_runs_have_a_baseline(
    exporter: Exporter, name: str, labels: dict[str, str]
) -> None:
    exporter.observe_run(make_report(baseline=False))
    absent_before = value(exporter, name, **labels)
    exporter.observe_run(make_report(baseline=True))
    present = value(exporter, name, **labels)
    exporter.observe_run(make_report(baseline=False))
    assert absent_before is None
    assert present is not None
    assert value(exporter, name, **labels) is None
    assert value(exporter, "ragcanary_hit_rate", k="5") == 0.5


def test_a_run_without_query_vectors_removes_the_embedding_drift_gauges(exporter: Exporter) -> None:
    """A target that stopped searching by vector (embedding: removed) leaves no stale drift."""
    exporter.observe_run(make_report())
    report = make_report()
    assert report.baseline is not None
    vectorless = replace(report.baseline, embedding_drift=None, embedding_changed_ratio=None)
    exporter.observe_run(replace(report, baseline=vectorless))
    assert value(exporter, "ragcanary_embedding_drift") is None
    assert value(exporter, "ragcanary_embedding_changed_ratio") is None
    assert value(exporter, "ragcanary_score_drift") == 0.07


def test_stale_labels_are_counted_once_enough_runs_tell(exporter: Exporter) -> None:
    report = make_report()
    exporter.observe_run(replace(report, stale_labels=None))  # fewer than stale_label_runs
    assert value(exporter, "ragcanary_stale_labels") is None
    labels = (StaleLabelEntry("c1", "d-1", "not_returned"), StaleLabelEntry("c2", "d-9", "missing"))
    exporter.observe_run(replace(report, stale_labels=labels))
    assert value(exporter, "ragcanary_stale_labels") == 2.0
    exporter.observe_run(make_report("unavailable", coverage=0.0, cases=[]))
    assert value(exporter, "ragcanary_stale_labels") == 2.0  # an outage says nothing of labels


def _short(report: RunReport, short: int | Absent) -> RunReport:
    """``report`` with ``counts.short`` set (ABSENT: a report older than the count)."""
    return replace(report, counts=replace(report.counts, short=short))


def test_the_short_count_is_the_newest_answered_run_s(exporter: Exporter) -> None:
    """``ragcanary_result_count_short`` follows ``counts.short`` of each answered run; an
    outage keeps it, and a report older than the count removes it rather than show a 0."""
    exporter.observe_run(_short(make_report("regression"), 3))
    assert value(exporter, "ragcanary_result_count_short") == 3.0
    exporter.observe_run(_short(make_report("unavailable", coverage=0.0, cases=[]), 0))
    assert value(exporter, "ragcanary_result_count_short") == 3.0  # an outage says nothing
    exporter.observe_run(_short(make_report("ok"), 0))
    assert value(exporter, "ragcanary_result_count_short") == 0.0
    exporter.observe_run(_short(make_report("ok"), ABSENT))
    assert value(exporter, "ragcanary_result_count_short") is None
    text = generate_latest(exporter.registry).decode()
    assert "# TYPE ragcanary_result_count_short gauge" in text


def test_a_null_metric_in_an_answered_run_removes_its_stale_value(exporter: Exporter) -> None:
    exporter.observe_run(make_report())
    report = make_report()
    exporter.observe_run(replace(report, metrics={**report.metrics, "mrr": None}))
    assert value(exporter, "ragcanary_mrr") is None


@pytest.mark.parametrize(
    ("started_at", "finished"),
    [
        (None, 1.5),  # left out: read as the epoch, plus the run's 1.5 s
        ("2026-11-22T10:00:00", 1795341601.5),  # no zone: UTC, as reports are written
    ],
)
def test_the_last_run_time_is_the_reports_own_not_the_clock(
    exporter: Exporter, started_at: str | None, finished: float
) -> None:
    """A report always has a start (one written without it reads as the epoch): the last-run
    time is that start plus the duration, never the time the exporter saw the report."""
    data = make_report_data()
    if started_at is None:
        del data["started_at"]
    else:
        data["started_at"] = started_at
    exporter.observe_run(unmarshal(data))
    assert value(exporter, "ragcanary_last_run_timestamp_seconds") == finished


def test_query_outcomes_are_counted_from_cases_when_the_report_has_no_counts(
    exporter: Exporter,
) -> None:
    data = make_report_data()
    del data["counts"]
    exporter.observe_run(unmarshal(data))
    assert value(exporter, "ragcanary_queries_total", outcome="ok") == 2.0
    assert value(exporter, "ragcanary_queries_total", outcome="timeout") == 1.0


def test_reload_without_a_suite_removes_all_its_series(exporter: Exporter) -> None:
    exporter.observe_run(make_report())
    exporter.load({"other": SuitePairs(("search",), (5,))})
    text = generate_latest(exporter.registry).decode()
    assert 'suite="core"' not in text
    assert 'suite="other"' in text


def test_reload_without_a_target_removes_only_that_targets_series(exporter: Exporter) -> None:
    exporter.load(pairs("search", "backup"))
    exporter.observe_run(make_report(target="backup"))
    exporter.observe_run(make_report(target="search"))
    exporter.load(pairs("search"))
    text = generate_latest(exporter.registry).decode()
    assert 'target="backup"' not in text
    assert value(exporter, "ragcanary_hit_rate", k="5") == 0.5


def test_reload_keeps_counters_and_gauges_of_pairs_that_stay(exporter: Exporter) -> None:
    exporter.observe_run(make_report())
    exporter.load(pairs())
    assert value(exporter, "ragcanary_runs_total", outcome="ok") == 1.0
    assert value(exporter, "ragcanary_hit_rate", k="5") == 0.5


def test_reload_dropping_a_k_removes_the_series_of_that_k(exporter: Exporter) -> None:
    exporter.observe_run(make_report())
    exporter.load(pairs(ks=(1,)))
    assert value(exporter, "ragcanary_hit_rate", k="5") is None
    assert value(exporter, "ragcanary_judged_ratio", k="5") is None
    assert value(exporter, "ragcanary_judged_ratio", k="1") == 0.75
    assert value(exporter, "ragcanary_baseline_delta", metric="hit_rate@5") is None
    assert value(exporter, "ragcanary_baseline_delta", metric="mrr") == -0.25
    assert value(exporter, "ragcanary_hit_rate", k="1") == 0.25


def test_a_report_of_a_pair_no_longer_loaded_does_not_bring_its_series_back(
    exporter: Exporter,
) -> None:
    exporter.load({"other": SuitePairs(("search",), (5,))})
    exporter.observe_run(make_report())
    assert 'suite="core"' not in generate_latest(exporter.registry).decode()


def test_per_case_series_are_off_by_default(exporter: Exporter) -> None:
    exporter.observe_run(make_report())
    text = generate_latest(exporter.registry).decode()
    assert "ragcanary_case_hit_rate{" not in text
    assert "ragcanary_case_series_dropped{" not in text


def test_per_case_series_follow_each_answered_case() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(per_case=True))
    exporter.observe_run(make_report())
    assert value(exporter, "ragcanary_case_hit_rate", case="c1", k="5") == 1.0
    assert value(exporter, "ragcanary_case_hit_rate", case="c2", k="1") == 0.0
    assert value(exporter, "ragcanary_case_rr", case="c1") == 1.0
    assert value(exporter, "ragcanary_case_rr", case="neg") is None
    assert value(exporter, "ragcanary_case_series_dropped") == 0.0


def test_per_case_series_are_capped_and_the_dropped_ones_counted() -> None:
    exporter = Exporter(CollectorRegistry(), per_case_limit=4)  # 3 series per case with 2 ks
    exporter.load(pairs(per_case=True))
    exporter.observe_run(make_report())
    assert value(exporter, "ragcanary_case_rr", case="c1") == 1.0
    assert value(exporter, "ragcanary_case_rr", case="c2") is None
    assert value(exporter, "ragcanary_case_series_dropped") == 6.0


def test_reload_turning_per_case_off_removes_per_case_series() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(per_case=True))
    exporter.observe_run(make_report())
    exporter.load(pairs(per_case=False))
    text = generate_latest(exporter.registry).decode()
    assert not re.search(r"^ragcanary_case_", text, re.MULTILINE)


@settings(max_examples=200, deadline=None)
@given(
    cases=st.integers(0, 50),
    ks=st.sets(st.integers(1, 20), min_size=1, max_size=5),
    limit=st.integers(0, 300),
)
def test_per_case_admission_never_exceeds_the_cap_and_accounts_every_series(
    cases: int, ks: set[int], limit: int
) -> None:
    ids = tuple(f"c{i}" for i in range(cases))
    admitted, dropped = per_case_admission(SuitePairs(("t",), tuple(ks), True, ids), limit)
    cost = len(ks) + 1
    assert admitted == ids[: len(admitted)]
    assert len(admitted) * cost <= limit
    assert len(admitted) * cost + dropped == cases * cost
    assert dropped == 0 or (len(admitted) + 1) * cost > limit


def test_document_ids_never_become_labels() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(per_case=True))
    exporter.observe_run(make_report())
    text = generate_latest(exporter.registry).decode()
    assert "d-c1-0" not in text
    assert 'case="c1"' in text


def test_the_exporter_reads_reports_of_the_real_pipeline() -> None:
    """A report built by ``build_report`` from a judged run lands in the gauges unchanged."""
    cases = [case("c1", ["d1"]), case("c2", ["d2"])]
    base = run([(cases[0], answer(["d1", "x"])), (cases[1], answer(["d2", "y"]))], "base")
    current = run([(cases[0], answer(["d1", "x"])), (cases[1], answer(["y", "z"]))], "now")
    scores = score_run(current, [1, 5], 10)
    drift = compare_runs(current, base, 10, 0.05)
    verdict = judge(scores, current.coverage, Policy(), score_run(base, [1, 5], 10), drift)
    report = build_report(Evaluation(current, scores, verdict, drift, "base"))
    exporter = Exporter(CollectorRegistry())
    exporter.load({"core": SuitePairs(("search",), (1, 5), True, ("c1", "c2"))})
    exporter.observe_run(report)
    assert value(exporter, "ragcanary_hit_rate", k="5") == pytest.approx(0.5)
    # c1's top-5 is d1 (judged) and x; c2's is y and z, none judged.
    assert report.metrics["judged@5"] == pytest.approx(0.25)
    assert value(exporter, "ragcanary_judged_ratio", k="5") == pytest.approx(0.25)
    assert value(exporter, "ragcanary_judged_ratio", k="1") == pytest.approx(0.5)
    assert value(exporter, "ragcanary_baseline_delta", metric="hit_rate@5") == pytest.approx(-0.5)
    assert value(exporter, "ragcanary_regressed_cases") == 1.0
    assert value(exporter, "ragcanary_case_rr", case="c2") == 0.0
    assert value(exporter, "ragcanary_queries_total", outcome="ok") == 2.0
    assert value(exporter, "ragcanary_runs_total", outcome=report.outcome) == 1.0


def _exposition_after_one_run() -> str:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(per_case=True))
    report = _recall(_short(make_report("regression"), 1), AnnRecall(10, 0.9, 10))
    exporter.observe_run(
        replace(report, stale_labels=(StaleLabelEntry("c2", "d-gone", "missing"),))
    )
    return generate_latest(exporter.registry).decode()


def test_exposition_has_no_duplicate_help_or_type_lines() -> None:
    meta = [line for line in _exposition_after_one_run().splitlines() if line.startswith("#")]
    duplicates = [line for line, n in Counter(meta).items() if n > 1]
    names = [line.split()[2] for line in meta if line.startswith("# TYPE")]
    assert duplicates == []
    assert len(names) == len(set(names))


def test_every_contract_metric_is_exposed_after_load_and_one_run() -> None:
    text = _exposition_after_one_run()
    sampled = {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1] != "#"}
    missing = [
        name
        for name in CONTRACT_METRICS
        if name not in sampled and f"{name}_count" not in sampled  # histograms
    ]
    assert missing == []


def test_histogram_buckets_span_retriever_latency_and_run_times() -> None:
    assert (QUERY_BUCKETS[0], QUERY_BUCKETS[-1]) == (0.005, 30.0)
    assert (RUN_BUCKETS[0], RUN_BUCKETS[-1]) == (0.1, 600.0)
    assert list(QUERY_BUCKETS) == sorted(set(QUERY_BUCKETS))
    assert list(RUN_BUCKETS) == sorted(set(RUN_BUCKETS))


def test_exposition_passes_promtool_check_metrics() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("RAGCANARY_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is not on PATH but RAGCANARY_REQUIRE_PROMTOOL=1")
        pytest.skip("promtool is not on PATH (set RAGCANARY_REQUIRE_PROMTOOL=1 to require it)")
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=_exposition_after_one_run(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _recall(report: RunReport, recall: AnnRecall | None) -> RunReport:
    """``report`` with a diagnosis whose ``ann_recall`` is ``recall``."""
    diagnosis = Diagnosis("none", "no regression and no drift", ann_recall=recall)
    return replace(report, diagnosis=diagnosis)


def test_ann_recall_is_exported_under_its_depth_and_removed_when_unknown(
    exporter: Exporter,
) -> None:
    exporter.observe_run(_recall(make_report("regression"), AnnRecall(10, 0.75, 8)))
    assert value(exporter, "ragcanary_ann_recall", k="10") == 0.75
    exporter.observe_run(_recall(make_report("ok"), AnnRecall(20, 1.0, 8)))  # another depth
    assert value(exporter, "ragcanary_ann_recall", k="20") == 1.0
    assert value(exporter, "ragcanary_ann_recall", k="10") is None
    exporter.observe_run(_recall(make_report("ok"), None))  # could not be told: no false 1
    assert value(exporter, "ragcanary_ann_recall", k="20") is None


def test_lost_documents_is_0_when_only_label_free_causes_were_seen(exporter: Exporter) -> None:
    """A shorter answer or a diverging endpoint names no judged id: nothing left the top-k, so
    0 is what the run measured, even for a target that cannot look ids up; only ids that left
    without the index being asked make the gauge absent."""
    short = CauseEvidence("short_results", ("c1",), (), "answered with fewer than 10 results")
    said = Diagnosis("none", "no regression and no drift", causes=(short,))
    exporter.observe_run(replace(make_report("ok"), diagnosis=said))
    assert value(exporter, "ragcanary_lost_documents") == 0.0
    left = CauseEvidence("unknown", ("c2",), ("d2",), "not established")
    unasked = Diagnosis("unknown", "no layer could be named", causes=(short, left))
    exporter.observe_run(replace(make_report("regression"), diagnosis=unasked))
    assert value(exporter, "ragcanary_lost_documents") is None


def test_maintenance_is_zero_per_pair_until_a_window_holds_it(exporter: Exporter) -> None:
    """ragcanary_maintenance exists at 0 from the start, is 1 while a change window holds the
    pair, 0 again once it closes, and the /metrics text says so each time."""
    assert value(exporter, "ragcanary_maintenance") == 0.0
    exporter.set_maintenance({(CORE["suite"], CORE["target"]), ("gone", "nowhere")})
    assert value(exporter, "ragcanary_maintenance") == 1.0
    text = exporter.exposition().decode()
    assert f'ragcanary_maintenance{{suite="{CORE["suite"]}",target="{CORE["target"]}"}} 1.0' in text
    assert (
        exporter.registry.get_sample_value(
            "ragcanary_maintenance", {"suite": "gone", "target": "nowhere"}
        )
        is None
    )
    exporter.load(pairs())  # a reload keeps the hold
    assert value(exporter, "ragcanary_maintenance") == 1.0
    exporter.set_maintenance(set())
    assert value(exporter, "ragcanary_maintenance") == 0.0
    assert (
        'ragcanary_maintenance{suite="core",target="search"} 0.0' in exporter.exposition().decode()
    )
