"""deploy/prometheus/alerts.yml: valid, unit-tested with promtool, readable by whoever is paged."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from alert_contract import ALERTS, CONTRACT, alert_rules
from prometheus_server import prometheus_binary

from ragcanary.serve.http.ui import runbookpage

ROOT = Path(__file__).resolve().parents[2]
UNIT_TESTS = ROOT / "tests" / "prometheus" / "alerts_test.yml"
# Alerts about the daemon itself carry no suite or target: their descriptions name the
# instance (or, across replicas, the job) instead.
DAEMON_WIDE = {"RagCanaryConfigReloadFailed", "RagCanaryDown", "RagCanaryStorageDown"}
JOB_WIDE = {"RagCanaryConfigMismatch"}
# Limits a suite sets must come from ragcanary_threshold, never be copied into a rule.
COPIED_DEFAULTS = re.compile(r"(?<![\w.])(0\.02|0\.7|0\.9|0\.05)(?![\w.])")


RULES = alert_rules()
# An alert name may have several rules (RagCanaryStale has two): number them in test ids.
PER_RULE = pytest.mark.parametrize(
    "rule", RULES, ids=[f"{r['alert']}-{i}" for i, r in enumerate(RULES)]
)


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    command = [prometheus_binary("promtool"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_promtool_check_rules_accepts_the_file() -> None:
    result = _promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = _promtool("test", "rules", str(UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_file_defines_exactly_the_contract_alerts() -> None:
    assert {rule["alert"] for rule in RULES} == CONTRACT


def test_unit_tests_check_every_alert_firing_and_not_firing() -> None:
    document = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))
    checks = [check for test in document["tests"] for check in test.get("alert_rule_test", [])]
    firing = {c["alertname"] for c in checks if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in checks if not c.get("exp_alerts")}
    assert CONTRACT - firing == set(), "alerts never tested firing"
    assert CONTRACT - quiet == set(), "alerts never tested staying quiet"


@PER_RULE
def test_alert_has_a_severity_and_a_for_duration(rule: dict[str, Any]) -> None:
    assert rule.get("labels", {}).get("severity") in {"critical", "warning"}
    assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), "a for: of minutes, not flapping"


@PER_RULE
def test_alert_has_summary_description_and_runbook(rule: dict[str, Any]) -> None:
    annotations = rule.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        assert str(annotations.get(key, "")).strip(), f"{rule['alert']} has no {key}"


@PER_RULE
def test_description_names_the_suite_target_and_value(rule: dict[str, Any]) -> None:
    description = rule["annotations"]["description"]
    if rule["expr"].strip().startswith("absent("):
        # No series is left to take labels or a value from: it says so instead.
        assert "no suite" in description
        assert "no target" in description
        return
    if rule["alert"] in DAEMON_WIDE | JOB_WIDE:
        assert "{{ $labels.instance }}" in description or rule["alert"] in JOB_WIDE
        assert "{{ $labels.job }}" in description or rule["alert"] in DAEMON_WIDE
        assert re.search(r"\{\{ \$value( \| [^}]+)? \}\}", description)
        return
    assert "{{ $labels.suite }}" in description
    assert "{{ $labels.target }}" in description
    # Raw values such as 0.2282608695652174 or 1.7953e+09 are for machines.
    assert re.search(r"\{\{ \$value \| (humanize\w*|printf \"[^\"]+\") \}\}", description)


# The runbook's page at runbook_base_url, else on the daemon the ui_url annotation links to.
RUNBOOK_LINK = (
    '{{ with query "max by (url) (ragcanary_runbook_info)" | sortByLabel "url" }} '
    '{{- . | first | label "url" }}/ALERT{{ else }} '
    '{{- with query "max by (url) (ragcanary_ui_info)" | sortByLabel "url" }} '
    '{{- . | first | label "url" }}/ui/runbooks/ALERT{{ end }}{{ end }}'
)


@PER_RULE
def test_runbook_url_opens_the_alerts_runbook_where_ui_url_opens_the_pages(
    rule: dict[str, Any],
) -> None:
    """A clickable address, not a path in a repository: the runbook the daemon serves (from
    the package) at the base of ui_url, unless runbook_base_url names another place."""
    assert rule["annotations"]["runbook_url"] == RUNBOOK_LINK.replace("ALERT", rule["alert"])
    assert rule["alert"] in runbookpage.names(), f"{rule['alert']} has no runbook to serve"


@PER_RULE
def test_rules_read_suite_thresholds_instead_of_copying_the_defaults(rule: dict[str, Any]) -> None:
    """max_drop, min_rank_overlap, min_coverage and significance come from ragcanary_threshold."""
    assert not COPIED_DEFAULTS.findall(rule["expr"]), rule["expr"]


def test_unit_tests_cover_a_one_minute_and_a_one_hour_schedule() -> None:
    """`for:` cannot scale with the interval: the tests show pages at both schedules."""
    text = UNIT_TESTS.read_text(encoding="utf-8")
    assert "0+60x" in text, "no suite run every minute"
    assert "0x59 3600x" in text, "no suite run hourly"


# The base every link is built on: the alphabetically first URL the daemons export, or nothing.
# (Folded YAML joins the template's lines with a space, which each "{{-" trims.)
UI_BASE = '{{ with query "max by (url) (ragcanary_ui_info)" | sortByLabel "url" }} '
PAIR_LINK = re.compile(
    re.escape(UI_BASE + '{{- . | first | label "url" }}')
    + r"/ui/(latest|diff|)\?suite=\{\{ \$labels\.suite \| urlquery \}\}"
    + re.escape(' {{- "&target=" }}{{ $labels.target | urlquery }}{{ end }}')
)


@PER_RULE
def test_alert_links_to_the_ui_page_of_its_pair_or_to_the_fleet_page(rule: dict[str, Any]) -> None:
    """ui_url is the contract for tooling: the page of the alert's suite and target, escaped."""
    url = rule["annotations"].get("ui_url")
    assert url, f"{rule['alert']} has no ui_url"
    if rule["alert"] in DAEMON_WIDE | JOB_WIDE:
        assert url == UI_BASE + '{{- . | first | label "url" }}/ui/{{ end }}'
    else:
        assert PAIR_LINK.fullmatch(url), url


def test_unit_tests_expect_a_ui_url_with_every_firing_alert() -> None:
    document = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))
    expected = [
        alert["exp_annotations"]
        for test in document["tests"]
        for check in test.get("alert_rule_test", [])
        for alert in check.get("exp_alerts") or []
    ]
    assert expected
    missing = [a["summary"] for a in expected if "ui_url" not in a]
    assert not missing, f"exp_annotations without ui_url: {missing}"
    assert "" in [a["ui_url"] for a in expected], "no test of an alert without ragcanary_ui_info"


HOLD = "unless on (suite, target) ragcanary_maintenance == 1"


@PER_RULE
def test_every_alert_is_held_while_a_change_window_is_open(rule: dict[str, Any]) -> None:
    """docs/alerts.md, "Change windows": the last line of every rule holds it while its pair's
    target is inside a declared change's window (alerts without a pair are never matched)."""
    assert rule["expr"].rstrip().splitlines()[-1].strip() == HOLD, rule["expr"]


def test_unit_tests_show_a_window_holding_a_page_and_releasing_it() -> None:
    """A degraded pair inside a window stays quiet and pages once the window ends."""
    document = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))
    held = [
        test
        for test in document["tests"]
        if any("ragcanary_maintenance" in s["series"] for s in test["input_series"])
    ]
    assert held, "no promtool test sets ragcanary_maintenance"
    fired = {
        (check["eval_time"], alert["exp_labels"]["target"])
        for test in held
        for check in test["alert_rule_test"]
        if check["alertname"] == "RagCanaryRegression"
        for alert in check.get("exp_alerts") or []
    }
    assert ("10m", "kb") in fired
    assert ("10m", "docs-search") not in fired
    assert ("25m", "docs-search") in fired
