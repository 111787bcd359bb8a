"""The Grafana dashboards and provisioning: generated, consistent, querying only exported series."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from factories import case_entry, run_report

from ragcanary.measure.slo import GoodAnswer, Objective
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
DEPLOY = ROOT / "deploy"
PROMETHEUS_BUILTINS = {"ALERTS"}  # series Prometheus itself writes for alerting rules


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_build", GRAFANA / "build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_builder()
FILES = sorted((GRAFANA / "dashboards").glob("*.json"))
BOARDS = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in FILES}


def _exported_labels() -> dict[str, set[str]]:
    """Every series name a daemon exports after one answered run, with its label names."""
    exporter = Exporter()
    limits = {"max_drop": 0.02, "min_rank_overlap": 0.7, "hit_rate@5": 0.6}
    slo = Objective(0.99, 30 * 86400.0, GoodAnswer("hit_rate@5"))
    spec = SuitePairs(
        targets=("search",), ks=(1, 5), thresholds=limits, interval_seconds=60.0, slo=slo
    )
    exporter.load({"core": spec}, config_hash="0123456789ab", ui_url="http://127.0.0.1:9464")
    exporter.set_budget("core", "search", 0.5, {"1h": 2.0, "6h": 1.0})
    exporter.observe_run(
        run_report(
            metrics={f"{m}@5": 1.0 for m in build.CUT_OFF_METRICS} | {"mrr": 1.0},
            baseline={
                "rank_overlap": 1.0,
                "score_drift": 0.0,
                "score_drifted_ratio": 0.0,
                "embedding_drift": 0.0,
                "embedding_changed_ratio": 0.0,
                "deltas": {"mrr": 0.0},
            },
            cases=[case_entry("c", scores=[0.5], latency_s=0.01)],
            stale_labels=[],
        )
    )
    labels: dict[str, set[str]] = defaultdict(set)
    for family in exporter.registry.collect():
        for sample in family.samples:
            labels[sample.name].update(sample.labels)
    return labels


EXPORTED = _exported_labels()


@dataclass(frozen=True)
class Selector:
    """One series selector of a PromQL expression: a metric name and its ``{...}`` matchers."""

    metric: str
    matchers: str


_TOKEN = re.compile(
    r"""
      "(?:[^"\\]|\\.)*"      # a string
    | \{[^}]*\}              # label matchers
    | \[[^\]]*\]             # a range
    | \d[\w.]*               # a number or duration
    | [A-Za-z_:][\w:]*       # an identifier: metric, function, keyword
    | \S                     # an operator or a parenthesis
    """,
    re.VERBOSE,
)
_IDENTIFIER = re.compile(r"[A-Za-z_:][\w:]*")
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = _GROUPING | {"and", "or", "unless", "bool", "offset"}


def tokens(expr: str) -> list[str]:
    return _TOKEN.findall(expr)


def _located_selectors(toks: list[str]) -> list[tuple[int, Selector]]:
    """The series selectors among ``toks``, each with the index of its token."""
    found: list[tuple[int, Selector]] = []
    i = 0
    while i < len(toks):
        tok, following = toks[i], toks[i + 1] if i + 1 < len(toks) else ""
        if tok in _GROUPING and following == "(":
            i = toks.index(")", i) + 1  # a label list, not metrics
            continue
        if tok.startswith("{") and not (i and _IDENTIFIER.fullmatch(toks[i - 1])):
            found.append((i, Selector("", tok)))  # a selector without a metric name
        elif (
            _IDENTIFIER.fullmatch(tok)
            and tok not in _KEYWORDS
            and following != "("
            and following not in _GROUPING
        ):
            found.append((i, Selector(tok, following if following.startswith("{") else "")))
        i += 1
    return found


def selectors(expr: str) -> list[Selector]:
    """The series selectors of ``expr``: identifiers that are no function, keyword or label list."""
    return [selector for _, selector in _located_selectors(tokens(expr))]


def _filtering(toks: list[str]) -> set[int]:
    """Indices of the tokens in a right operand of ``and`` or ``unless``, which only chooses
    the series of the left one: its values are never shown."""
    hidden: set[int] = set()
    i = 0
    while i < len(toks):
        if toks[i] not in {"and", "unless"}:
            i += 1
            continue
        depth, i = 0, i + 1
        while i < len(toks):  # up to the end of the enclosing group, or an `or` beside it
            if depth == 0 and toks[i] in {")", "or"}:
                break
            depth += {"(": 1, ")": -1}.get(toks[i], 0)
            hidden.add(i)
            i += 1
    return hidden


def shown_selectors(expr: str) -> list[Selector]:
    """The selectors whose values ``expr`` shows: not those that only filter it."""
    toks = tokens(expr)
    hidden = _filtering(toks)
    return [selector for i, selector in _located_selectors(toks) if i not in hidden]


_AGGREGATIONS = {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "quantile"}


def unmerged_selectors(expr: str) -> list[Selector]:
    """The selectors of ``expr`` outside every aggregation that merges replicas (one whose
    grouping drops ``instance``): their series would be drawn once per replica."""
    toks = tokens(expr)
    merging: list[bool] = []  # per open parenthesis: does it hold a merging aggregation's input?
    pending: bool | None = None  # an aggregation's grouping seen, its input not opened yet
    merged_at: dict[int, bool] = {}
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok in _AGGREGATIONS and i + 1 < len(toks) and toks[i + 1] in {"(", "by", "without"}:
            pending = True
            if toks[i + 1] in {"by", "without"}:
                end = toks.index(")", i + 2)
                labels = {t for t in toks[i + 3 : end] if t != ","}
                drops = ("instance" in labels) == (toks[i + 1] == "without")
                pending, i = drops, end
            i += 1
            continue
        if tok == "(":
            merging.append(bool(pending))
            pending = None
        elif tok == ")":
            merging.pop()
        merged_at[i] = any(merging)
        i += 1
    return [s for i, s in _located_selectors(toks) if not merged_at.get(i, False)]


def all_queries() -> list[tuple[str, str, str]]:
    """(file, panel title, expr) of every panel query of every dashboard."""
    return [
        (name, title, expr)
        for name, board in BOARDS.items()
        for title, expr in build.queries(board)
    ]


def all_exprs() -> list[tuple[str, str, str]]:
    """Every panel query, and every annotation query as (file, annotation name, expr)."""
    annotations = [
        (name, a["name"], a["expr"])
        for name, board in BOARDS.items()
        for a in board["annotations"]["list"]
        if "expr" in a
    ]
    return all_queries() + annotations


def variables(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in board["templating"]["list"]}


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def provisioning(kind: str) -> dict[str, Any]:
    files = list((GRAFANA / "provisioning" / kind).glob("*.yml"))
    assert len(files) == 1, f"expected one provisioning file in {kind}/, found {files}"
    return load_yaml(files[0])


def compose_mounts(service: str) -> dict[Path, str]:
    """Host directory (resolved) -> container path of each bind mount of a compose service."""
    compose = load_yaml(DEPLOY / "docker-compose.yml")
    mounts: dict[Path, str] = {}
    for volume in compose["services"][service]["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            mounts[(DEPLOY / source).resolve()] = target
    return mounts


@pytest.fixture(scope="module")
def promtool() -> str:
    """The promtool binary; skips when it is absent (fails under RAGCANARY_REQUIRE_PROMETHEUS=1)."""
    path = shutil.which("promtool")
    if path is None:
        reason = "promtool is not installed (Debian package prometheus); PromQL not parsed"
        if os.environ.get("RAGCANARY_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"{reason} (RAGCANARY_REQUIRE_PROMETHEUS=1 forbids skipping)")
        pytest.skip(reason)
    return path


def test_committed_dashboards_are_the_generators_output() -> None:
    """grafana/dashboards/ holds exactly what `python grafana/build.py` writes."""
    assert sorted(BOARDS) == sorted(build.dashboards())
    assert list(build.stale()) == [], "run: python grafana/build.py"


def test_the_three_dashboards_of_the_contract_exist() -> None:
    """Fleet overview, one suite in depth, drift investigation."""
    titles = {board["title"] for board in BOARDS.values()}
    assert titles == {
        "ragcanary / Fleet overview",
        "ragcanary / Suite in depth",
        "ragcanary / Drift investigation",
    }


def test_uids_and_titles_are_unique_and_stable() -> None:
    """Links and bookmarks rely on uids; Grafana refuses two dashboards with one uid."""
    uids = [board["uid"] for board in BOARDS.values()]
    titles = [board["title"] for board in BOARDS.values()]
    assert len(set(uids)) == len(uids)
    assert len(set(titles)) == len(titles)
    assert all(re.fullmatch(r"ragcanary-[a-z]+", uid) for uid in uids), uids


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_is_a_grafana_json_model(name: str) -> None:
    """Schema version of Grafana 10/11, panel ids and titles unique, panels inside the grid."""
    board = BOARDS[name]
    assert board["schemaVersion"] == 39
    assert board["tags"] == ["ragcanary"]
    panels = board["panels"]
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids)
    titles = [p["title"] for p in panels]
    duplicated = {t for t in titles if titles.count(t) > 1}
    # A stat and a graph of one metric may share a title; every other title is unique.
    assert all({p["type"] for p in panels if p["title"] == t} >= {"stat"} for t in duplicated)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        grid = p["gridPos"]
        assert 0 <= grid["x"] < grid["x"] + grid["w"] <= 24, p["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & area, f"panel {p['title']!r} overlaps another"
        cells |= area
        assert p["description"], f"panel {p['title']!r} has no description"
        refs = [t["refId"] for t in p["targets"]]
        assert refs, f"panel {p['title']!r} has no query"
        assert len(set(refs)) == len(refs)


@pytest.mark.parametrize(("name", "title", "expr"), all_exprs())
def test_every_query_selects_only_exported_series(name: str, title: str, expr: str) -> None:
    """Each metric a query names is one a daemon really exports (or Prometheus's ALERTS)."""
    found = selectors(expr)
    assert found, f"{name} / {title}: no series selector in {expr!r}"
    unknown = {s.metric for s in found} - set(EXPORTED) - PROMETHEUS_BUILTINS
    assert not unknown, f"{name} / {title}: {sorted(unknown)} are not exported by ragcanary"


@pytest.mark.parametrize(("name", "title", "expr"), all_exprs())
def test_every_query_honours_the_suite_and_target_variables(
    name: str, title: str, expr: str
) -> None:
    """A series labelled by suite and target is filtered on ``$suite`` and ``$target``."""
    for selector in selectors(expr):
        labels = EXPORTED.get(selector.metric, {"suite", "target"})  # ALERTS carries both
        for label in {"suite", "target"} & labels:
            assert f'{label}=~"${label}' in selector.matchers, (
                f"{name} / {title}: {selector.metric} is not filtered on ${label}"
            )


@pytest.mark.parametrize(("name", "title", "expr"), all_queries())
def test_every_query_shows_one_series_per_pair_whatever_the_replicas(
    name: str, title: str, expr: str
) -> None:
    """Replicas on one database each export every pair's gauges (issue 16): a series of a pair
    is read through an aggregation that drops ``instance``, never drawn once per replica."""
    per_pair = [s for s in unmerged_selectors(expr) if "suite" in EXPORTED.get(s.metric, set())]
    assert not per_pair, f"{name} / {title}: {per_pair} shown once per replica"


@pytest.mark.parametrize(("name", "title", "expr"), all_exprs())
def test_every_range_is_the_rate_interval(name: str, title: str, expr: str) -> None:
    """Rates use ``$__rate_interval`` so they never fall between two scrapes."""
    ranges = [t for t in tokens(expr) if t.startswith("[")]
    assert all(r == "[$__rate_interval]" for r in ranges), f"{name} / {title}: {ranges}"


def test_the_selector_parser_sees_metrics_not_functions_or_labels() -> None:
    """The parser the checks above rely on, on a query with every construct they use."""
    expr = (
        'count(group by (suite) (a_total{suite=~"$suite"})) or vector(0) '
        "- histogram_quantile(0.95, sum by (target, le) (rate(b_bucket[$__rate_interval]))) "
        "+ time() - c"
    )
    assert selectors(expr) == [
        Selector("a_total", '{suite=~"$suite"}'),
        Selector("b_bucket", ""),
        Selector("c", ""),
    ]
    assert selectors('{__name__="x"}') == [Selector("", '{__name__="x"}')]
    filtered = "max without (instance) (a and ignoring (k) (b == c)) unless d or e"
    assert shown_selectors(filtered) == [Selector("a", ""), Selector("e", "")]
    merged = "sum by (suite) (a) + max without (instance, pod) (b) + max by (instance) (c) - d"
    assert unmerged_selectors(merged) == [Selector("c", ""), Selector("d", "")]
    assert unmerged_selectors("count(group by (suite) (a)) or time() - max(b) by (k)") == []


def test_each_gauge_has_one_unit_across_dashboards() -> None:
    """The same quantity reads the same everywhere: a ratio is a percentage on every panel."""
    units: dict[str, set[str]] = defaultdict(set)
    for board in BOARDS.values():
        for p in board["panels"]:
            if p["type"] in {"table", "heatmap"}:
                continue  # units per column or on the y axis
            for target in p["targets"]:
                for s in shown_selectors(target["expr"]):  # not a filter's timestamps
                    if not s.metric.endswith(("_total", "_bucket")) and s.metric in EXPORTED:
                        units[s.metric].add(p["fieldConfig"]["defaults"]["unit"])
    assert units, "no gauge found on any panel"
    mixed = {metric: u for metric, u in units.items() if len(u) > 1}
    assert not mixed


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_suite_and_target_variables_are_defined_and_used(name: str) -> None:
    """Each dashboard offers the data source, suite and target pickers, and every one is used."""
    board = BOARDS[name]
    found = variables(board)
    assert list(found) == ["datasource", "suite", "target", "ui_url"]
    assert found["suite"]["query"]["query"] == "label_values(ragcanary_runs_total, suite)"
    assert found["target"]["query"]["query"] == (
        'label_values(ragcanary_runs_total{suite=~"$suite"}, target)'
    )
    text = json.dumps(board["panels"])
    for variable in found:
        used = (f"${variable}", f"${{{variable}}}", f"${{{variable}:")
        assert any(form in text for form in used), f"${variable} is unused"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_query_uses_the_datasource_variable(name: str) -> None:
    """Panels and queries follow the data source picker, whose default is the provisioned one."""
    board = BOARDS[name]
    expected = {"type": "prometheus", "uid": "${datasource}"}
    for p in board["panels"]:
        assert p["datasource"] == expected, p["title"]
        assert all(t["datasource"] == expected for t in p["targets"]), p["title"]
    for variable in board["templating"]["list"][1:]:
        assert variable["datasource"] == expected
    assert variables(board)["datasource"]["query"] == "prometheus"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_firing_ragcanary_alerts_are_annotated(name: str) -> None:
    """Every dashboard marks when a RagCanary alert fired for the selected pairs."""
    exprs = [a.get("expr", "") for a in BOARDS[name]["annotations"]["list"] if a["enable"]]
    assert any(
        s.metric == "ALERTS" and 'alertname=~"RagCanary.*"' in s.matchers
        for expr in exprs
        for s in selectors(expr)
    )


def test_provisioned_datasource_is_the_dashboards_default() -> None:
    """The provisioned Prometheus has the uid every dashboard's data source variable defaults to."""
    (datasource,) = provisioning("datasources")["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["uid"] == build.DATASOURCE_UID
    for board in BOARDS.values():
        assert variables(board)["datasource"]["current"]["value"] == datasource["uid"]


def test_dashboard_provider_loads_the_dashboards_folder() -> None:
    """One file provider reads a directory of dashboards into the ragcanary folder."""
    (provider,) = provisioning("dashboards")["providers"]
    assert provider["type"] == "file"
    assert provider["folder"] == "ragcanary"
    assert Path(provider["options"]["path"]).is_absolute()


def test_local_stack_mounts_the_provisioning_where_grafana_reads_it() -> None:
    """deploy/docker-compose.yml puts provisioning and dashboards where the provider looks."""
    mounts = compose_mounts("grafana")
    (provider,) = provisioning("dashboards")["providers"]
    assert mounts[GRAFANA / "provisioning"] == "/etc/grafana/provisioning"
    assert mounts[GRAFANA / "dashboards"] == provider["options"]["path"]


def test_provisioned_datasource_is_the_local_stacks_prometheus() -> None:
    """The data source reaches the compose service `prometheus`, at its scrape interval."""
    (datasource,) = provisioning("datasources")["datasources"]
    assert "prometheus" in load_yaml(DEPLOY / "docker-compose.yml")["services"]
    assert datasource["url"] == "http://prometheus:9090"
    scrape = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["global"]["scrape_interval"]
    # $__rate_interval is derived from timeInterval: it must be the real scrape interval.
    assert datasource["jsonData"]["timeInterval"] == scrape


def test_every_query_parses_with_promtool(promtool: str, tmp_path: Path) -> None:
    """promtool accepts every query, as Grafana sends it, as the expression of a recording rule."""
    exprs = all_exprs()
    rules = [
        {"record": f"dashboard:query_{i}", "expr": build.instantiate(expr)}
        for i, (_, _, expr) in enumerate(exprs)
    ]
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout


LINK = re.compile(r"\$\{ui_url:raw\}/ui/(?P<page>latest|diff|)\?(?P<query>.*)")


def data_links(board: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel type, panel title, url) of every data link of ``board``."""
    return [
        (p["type"], p["title"], link["url"])
        for p in board["panels"]
        for link in p["fieldConfig"]["defaults"].get("links", [])
    ]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_the_ui_url_variable_is_the_hidden_base_url_the_daemons_export(name: str) -> None:
    """One value, the alphabetically first URL like the alerts' ui_url, from an exported series."""
    variable = variables(BOARDS[name])["ui_url"]
    assert variable["query"]["query"] == "label_values(ragcanary_ui_info, url)"
    assert (variable["hide"], variable["multi"], variable["includeAll"]) == (2, False, False)
    assert variable["sort"] == 1  # alphabetical, ascending
    assert "url" in EXPORTED["ragcanary_ui_info"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboards_link_to_the_ui_pages_of_each_pair(name: str) -> None:
    """Every panel that shows one series per pair links to that pair's run and diff pages, with
    the names escaped as query values; the link bar leads to the fleet page."""
    board = BOARDS[name]
    one_suite = variables(board)["suite"]["multi"] is False
    per_pair = [
        p
        for p in board["panels"]
        if p["type"] != "heatmap"
        and all("{{target}}" in t.get("legendFormat", "") for t in p["targets"])
    ]
    assert per_pair
    linked = {title for _, title, _ in data_links(board)}
    assert {p["title"] for p in per_pair} <= linked
    suite = "${suite:percentencode}" if one_suite else "${__field.labels.suite:percentencode}"
    for kind, title, url in data_links(board):
        match = LINK.fullmatch(url)
        assert match, f"{title}: {url}"
        assert match["page"] in ("latest", "diff"), url
        if kind == "table":
            expected = "suite=${__data.fields.suite:percentencode}"
            expected += "&target=${__data.fields.target:percentencode}"
        else:
            expected = f"suite={suite}&target=${{__field.labels.target:percentencode}}"
        assert match["query"] in (expected, expected + "&at=${__value.time}"), url
    pages = {
        (match["page"], "at=" in url)
        for _, _, url in data_links(board)
        if (match := LINK.fullmatch(url))
    }
    assert pages == {("latest", False), ("latest", True), ("diff", False)}
    (fleet,) = [link for link in board["links"] if link["type"] == "link"]
    assert fleet["url"] == (
        "${ui_url:raw}/ui/?suite=${suite:percentencode}" if one_suite else "${ui_url:raw}/ui/"
    )
    assert fleet["includeVars"] is False  # the pages take suite=, not Grafana's var-suite=


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_change_windows_are_annotated(name: str) -> None:
    """Every dashboard marks the stretches a declared change held the selected pairs' alerts."""
    exprs = [a.get("expr", "") for a in BOARDS[name]["annotations"]["list"] if a["enable"]]
    assert any(
        s.metric == "ragcanary_maintenance" and 'suite=~"$suite"' in s.matchers
        for expr in exprs
        for s in selectors(expr)
    )
