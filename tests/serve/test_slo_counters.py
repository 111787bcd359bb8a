"""The SLO's counters and objective: at 0 when loaded, counted per run this replica made."""

from __future__ import annotations

from factories import case_entry, run_report
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ragcanary.measure.run_report import RunReport
from ragcanary.measure.slo import GoodAnswer, Objective
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs

CORE = {"suite": "core", "target": "search"}
SLO = Objective(0.99, 30 * 86400.0, GoodAnswer("hit_rate@5"))


def _exporter(slo: Objective | None = SLO) -> Exporter:
    exporter = Exporter(CollectorRegistry())
    exporter.load({"core": SuitePairs(targets=("search",), ks=(1, 5), slo=slo)})
    return exporter


def _value(exporter: Exporter, name: str) -> float | None:
    return exporter.registry.get_sample_value(name, CORE)


def _run(run_id: str, *hits: float, outcome: str = "ok") -> RunReport:
    cases = [case_entry(f"c{i}", metrics={"hit_rate@5": h}) for i, h in enumerate(hits)]
    cases.append(case_entry("neg", kind="negative"))
    cases.append(case_entry("down", outcome="timeout", error="timed out"))
    return run_report(run_id, outcome=outcome, cases=cases)


def test_counters_exist_at_zero_and_the_objective_is_set_when_a_suite_is_loaded() -> None:
    exporter = _exporter()
    assert _value(exporter, "ragcanary_slo_events_total") == 0.0
    assert _value(exporter, "ragcanary_slo_good_total") == 0.0
    assert _value(exporter, "ragcanary_slo_objective") == 0.99


def test_a_suite_without_slo_exports_no_slo_series() -> None:
    exporter = _exporter(None)
    for name in ("ragcanary_slo_events_total", "ragcanary_slo_objective"):
        assert _value(exporter, name) is None


def test_each_run_adds_its_answered_labelled_canaries_and_the_good_ones() -> None:
    exporter = _exporter()
    exporter.observe_run(_run("r1", 1.0, 0.0, 1.0))
    exporter.observe_run(_run("r2", 0.0, 0.0, 1.0, outcome="regression"))
    assert _value(exporter, "ragcanary_slo_events_total") == 6.0
    assert _value(exporter, "ragcanary_slo_good_total") == 3.0


def test_an_outage_and_another_replica_s_run_count_nothing() -> None:
    exporter = _exporter()
    exporter.observe_run(_run("down", 0.0, outcome="unavailable"))
    exporter.observe_run(_run("theirs", 1.0, 1.0), counted=False)
    assert _value(exporter, "ragcanary_slo_events_total") == 0.0
    assert _value(exporter, "ragcanary_slo_good_total") == 0.0


def test_a_reload_keeps_the_counts_changes_the_objective_and_removing_the_slo_drops_them() -> None:
    exporter = _exporter()
    exporter.observe_run(_run("r1", 1.0, 0.0))
    tighter = Objective(0.999, 30 * 86400.0, GoodAnswer("hit_rate@5"))
    exporter.load({"core": SuitePairs(targets=("search",), ks=(1, 5), slo=tighter)})
    assert _value(exporter, "ragcanary_slo_events_total") == 2.0
    assert _value(exporter, "ragcanary_slo_objective") == 0.999
    exporter.load({"core": SuitePairs(targets=("search",), ks=(1, 5))})
    for name in (
        "ragcanary_slo_events_total",
        "ragcanary_slo_good_total",
        "ragcanary_slo_objective",
    ):
        assert _value(exporter, name) is None
    exporter.observe_run(_run("r2", 1.0))
    assert _value(exporter, "ragcanary_slo_events_total") is None


def test_a_pair_with_an_slo_beside_pairs_without_renders_one_valid_exposition() -> None:
    """The SLO counters of a pair without an SLO have no series, so that pair renders fewer
    families: /metrics still joins them family by family, as one registry would."""
    exporter = Exporter(CollectorRegistry())
    plain = SuitePairs(targets=("search",), ks=(1, 5))
    exporter.load({"before": plain, "core": SuitePairs(targets=("search",), ks=(1, 5), slo=SLO)})
    exporter.load(
        {
            "before": plain,
            "core": SuitePairs(targets=("search",), ks=(1, 5), slo=SLO),
            "zlast": plain,
        }
    )
    exporter.observe_run(_run("r1", 1.0, 0.0))
    exporter.set_budget("core", "search", 0.25, {"1h": 3.0, "6h": None})
    text = exporter.exposition().decode()
    families = [f.name for f in text_string_to_metric_families(text)]
    assert len(families) == len(set(families)), "a family's HELP and TYPE once"
    assert _samples(text) == _samples(generate_latest(exporter.registry).decode())
    assert _value(exporter, "ragcanary_slo_budget_remaining") == 0.25
    burn = {"window": "1h", **CORE}
    assert exporter.registry.get_sample_value("ragcanary_slo_burn_rate", burn) == 3.0
    assert (
        exporter.registry.get_sample_value("ragcanary_slo_burn_rate", {**CORE, "window": "6h"})
        is None
    )


def _samples(text: str) -> dict[str, list[tuple[str, float]]]:
    return {
        family.name: sorted(
            (repr(sorted(s.labels.items())) + s.name, s.value) for s in family.samples
        )
        for family in text_string_to_metric_families(text)
        if family.samples
    }
