"""The SLO rules `ragcanary rules` generates: valid, unit-tested, and what deploy/ ships."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from alert_contract import SLO_ALERTS
from prometheus_server import prometheus_binary
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.measure.slo import GoodAnswer, Objective
from ragcanary.reports.slo_rules import MAINTENANCE, WINDOWS, factor, render, rules
from ragcanary.serve.http.ui import runbookpage

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TESTS = ROOT / "tests" / "prometheus"
HIT5 = GoodAnswer("hit_rate@5")
# (config, --format, the shipped file that is its output)
SHIPPED = [
    (TESTS / "slo.yaml", "rules", TESTS / "slo_rules.yml"),
    (DEPLOY / "compose" / "ragcanary.yaml", "rules", DEPLOY / "prometheus" / "slo.yml"),
    (
        DEPLOY / "kubernetes" / "base" / "ragcanary.yaml",
        "prometheusrule",
        DEPLOY / "kubernetes" / "base" / "prometheusrule-slo.yaml",
    ),
]


def _rules_command(config: Path, fmt: str) -> str:
    unset = {name: None for name in os.environ if name.startswith("RAGCANARY_")}
    result = CliRunner().invoke(app, ["rules", "-c", str(config), "--format", fmt], env=unset)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    ("config", "fmt", "shipped"), SHIPPED, ids=[str(s.relative_to(ROOT)) for *_, s in SHIPPED]
)
def test_the_shipped_rules_are_the_commands_output_for_their_config(
    config: Path, fmt: str, shipped: Path
) -> None:
    """Edit the config's slo: without regenerating (or the file by hand) and this fails:
    ragcanary rules [--format prometheusrule] -c CONFIG > FILE."""
    assert _rules_command(config, fmt) == shipped.read_text(encoding="utf-8")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    command = [prometheus_binary("promtool"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("path", [TESTS / "slo_rules.yml", DEPLOY / "prometheus" / "slo.yml"])
def test_promtool_check_rules_accepts_the_generated_rules(path: Path) -> None:
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_promtool_check_rules_accepts_rules_of_several_suites_and_odd_names(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rules.yml"
    slos = {
        "core": Objective(0.99, 30 * 86400.0, HIT5),
        'we"ird\\name': Objective(0.999, 28 * 86400.0, GoodAnswer("ndcg@10", 0.5)),
    }
    path.write_text(render(slos), encoding="utf-8")
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_page_fast_ticket_slow_and_stay_quiet_when_healthy() -> None:
    """tests/prometheus/slo_test.yml: a total miss pages 9 minutes in, a 10 % bleed opens a
    ticket within 4 hours and never pages, a healthy pair never fires, a change window holds."""
    result = _promtool("test", "rules", str(TESTS / "slo_test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_check_each_slo_alert_firing_and_quiet() -> None:
    document = yaml.safe_load((TESTS / "slo_test.yml").read_text(encoding="utf-8"))
    checks = [c for test in document["tests"] for c in test.get("alert_rule_test", [])]
    assert {c["alertname"] for c in checks if c.get("exp_alerts")} == SLO_ALERTS
    assert {c["alertname"] for c in checks if not c.get("exp_alerts")} == SLO_ALERTS


def _alerts(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for g in document["groups"] for r in g["rules"] if "alert" in r]


def test_every_generated_alert_ends_in_the_maintenance_hold() -> None:
    """The contract for change windows, as every rule of alerts.yml has it."""
    document = rules({"core": Objective(0.99, 30 * 86400.0, HIT5)})
    alerts = _alerts(document)
    assert {a["alert"] for a in alerts} == SLO_ALERTS
    for alert in alerts:
        assert alert["expr"].rstrip().endswith(MAINTENANCE)
        assert MAINTENANCE == "unless on (suite, target) ragcanary_maintenance == 1"


def test_alerts_page_and_ticket_and_link_their_runbooks() -> None:
    document = rules({"core": Objective(0.99, 30 * 86400.0, HIT5)})
    severity = {a["alert"]: a["labels"]["severity"] for a in _alerts(document)}
    assert severity == {"RagCanarySLOBurnFast": "critical", "RagCanarySLOBurnSlow": "warning"}
    for alert in _alerts(document):
        annotations = alert["annotations"]
        assert {"summary", "description", "runbook_url", "ui_url"} <= set(annotations)
        assert f"/ui/runbooks/{alert['alert']}{{{{ end }}}}" in annotations["runbook_url"]
        assert alert["alert"] in runbookpage.names()


def test_error_ratios_are_recorded_over_the_five_windows_summed_over_replicas() -> None:
    document = rules({"core": Objective(0.99, 30 * 86400.0, HIT5)})
    recorded = {
        r["record"]: r["expr"] for g in document["groups"] for r in g["rules"] if "record" in r
    }
    assert list(recorded) == [f"ragcanary:slo_error_ratio:rate{w}" for w in WINDOWS]
    assert WINDOWS == ("5m", "30m", "1h", "6h", "3d")
    for expr in recorded.values():
        assert expr.count("sum by (suite, target) (increase(") == 3
        assert re.search(r"/ \(sum by \(suite, target\) \(increase\(.*\)\) > 0\)", expr)


@pytest.mark.parametrize(
    ("days", "spent", "window", "expected"),
    [
        (30, 0.02, "1h", 14.4),
        (30, 0.05, "6h", 6.0),
        (30, 0.10, "3d", 1.0),
        (28, 0.02, "1h", 13.44),
        (7, 0.10, "3d", 0.233333),
    ],
)
def test_factors_are_the_workbook_s_for_30_days_and_keep_its_shares_otherwise(
    days: int, spent: float, window: str, expected: float
) -> None:
    assert factor(Objective(0.99, days * 86400.0, HIT5), spent, window) == expected


def test_the_objective_and_suite_are_written_into_each_condition() -> None:
    document = rules({"core": Objective(0.995, 30 * 86400.0, HIT5)})
    fast = next(a for a in _alerts(document) if a["alert"] == "RagCanarySLOBurnFast")
    assert 'ragcanary:slo_error_ratio:rate1h{suite="core"} / (1 - 0.995) > 14.4' in fast["expr"]
    assert 'ragcanary:slo_error_ratio:rate5m{suite="core"} / (1 - 0.995) > 14.4' in fast["expr"]


def test_without_slos_the_rules_have_no_groups(tmp_path: Path) -> None:
    assert rules({}) == {"groups": []}
    config = tmp_path / "ragcanary.yaml"
    config.write_text("suites: {}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["rules", "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == {"groups": []}
    assert "no suite has an slo:" in result.stderr


def test_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "ragcanary.yaml"
    config.write_text("suites: {}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["rules", "-c", str(config), "--format", "json"])
    assert result.exit_code == 2
    assert "--format json: use rules or prometheusrule" in result.output
