"""Generates the Grafana dashboards in grafana/dashboards/ from one description (stdlib only).

The three dashboards share one data source variable, the same ``suite`` and ``target``
variables, the same alert annotation, units and links; writing them from code keeps them
consistent. The generated JSON is committed; tests/deploy/test_dashboards.py checks it is current.

    python grafana/build.py            # rewrite grafana/dashboards/*.json
    python grafana/build.py --check    # exit 1 when the committed JSON is out of date

Every panel query filters on ``suite=~"$suite"`` and ``target=~"$target"`` and may use
``$__rate_interval``; nothing else needs substituting to run it against Prometheus.

Replicas of ``ragcanary serve`` on one database each export every pair's gauges, so a pair
must show one line, not one per replica: gauges of a run are read through ``latest`` (the
replicas that show the pair's newest run, like the fleet view of deploy/prometheus/alerts.yml),
timestamps and thresholds through ``fleet`` (the largest), and counters and histograms are
summed (``increase``, ``quantile``). One daemon is the case of one replica.

Panels that show one series per pair (and the fleet table's rows) link to that pair's pages of
the daemon (``/ui/latest``, ``/ui/diff``, and the run at a clicked time), on the base URL the
hidden ``ui_url`` variable reads from ``ragcanary_ui_info``, as the alerts' ``ui_url`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

Json = dict[str, Any]

DASHBOARDS_DIR = Path(__file__).resolve().parent / "dashboards"
# The uid of the data source provisioned in provisioning/datasources/ragcanary.yml; the
# dashboards default to it and let a user pick another Prometheus in the variable.
DATASOURCE_UID = "ragcanary-prometheus"
DATASOURCE: Json = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
TAG = "ragcanary"
PAIR = 'suite=~"$suite", target=~"$target"'
# Daemon-wide alerts (RagCanaryConfigReloadFailed) carry no suite or target label: the
# trailing "|" lets the empty label match whatever suites are selected.
ALERTS = (
    'ALERTS{alertname=~"RagCanary.*", alertstate="firing", suite=~"$suite|", target=~"$target|"}'
)
CUT_OFF_METRICS = ("hit_rate", "ndcg", "recall", "precision")
# The daemon's web pages (issue 17) on the base URL the daemons export in ragcanary_ui_info:
# raw, since Grafana must not escape the URL's own ":" and "/"; suite and target names are
# escaped as query values (percentencode), whatever characters the config gave them.
UI = "${ui_url:raw}"
UI_QUERY = "label_values(ragcanary_ui_info, url)"
# Panels whose series are one line per pair (their legend names the target) link to its pages.
LINKED_PANELS = {"timeseries", "state-timeline", "stat", "bargauge"}
# The labels that tell replicas of one daemon apart (`pod` under a ServiceMonitor).
REPLICA_LABELS = "instance, pod"

RATIO = {"unit": "percentunit", "min": 0, "max": 1}
DELTA = {"unit": "percentunit"}
SCORE = {"unit": "none", "decimals": 3}
COUNT = {"unit": "short", "min": 0, "decimals": 0}
SECONDS = {"unit": "s", "min": 0}
BURN = {"unit": "suffix:\u00d7", "min": 0, "decimals": 2}  # times the allowed rate
VERDICT_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "0": {"text": "ok", "color": "green", "index": 0},
            "1": {"text": "REGRESSION", "color": "red", "index": 1},
        },
    }
]
RELOAD_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "0": {"text": "FAILED", "color": "red", "index": 0},
            "1": {"text": "ok", "color": "green", "index": 1},
        },
    }
]


def sel(metric: str, extra: str = "") -> str:
    """A selector of ``metric`` restricted to the dashboard's suites and targets."""
    return f"{metric}{{{PAIR}{extra}}}"


def fleet(expr: str) -> str:
    """``expr`` with the series of all replicas merged into one: the largest value. For what
    every replica exports alike or only grows (last-run times, thresholds, the interval)."""
    return f"max without ({REPLICA_LABELS}) ({expr})"


def latest(metric: str, extra: str = "", *, answered: bool = True) -> str:
    """A gauge of each pair's last run, one series per pair, from the replicas that show the
    pair's newest run: a replica cut from the database or gone keeps showing an older run,
    whose values must neither hide nor outlast the current ones. Quality gauges describe the
    last answered run; ``answered=False`` is for those every run sets (coverage)."""
    stamp = "last_success" if answered else "last_run"
    newest = sel(f"ragcanary_{stamp}_timestamp_seconds")
    freshest = f"{newest} == ignoring ({REPLICA_LABELS}) group_left {fleet(newest)}"
    return fleet(f"{sel(metric, extra)} and ignoring (k, metric) ({freshest})")


def increase(counter: str, by: str) -> str:
    """How much ``counter`` grew per rate interval, summed by the labels ``by``."""
    return f"sum by ({by}) (increase({sel(counter)}[$__rate_interval]))"


def quantile(q: float, histogram: str, by: str) -> str:
    """The ``q`` quantile of ``histogram`` over each rate interval, by the labels ``by``."""
    buckets = f"rate({sel(histogram + '_bucket')}[$__rate_interval])"
    return f"histogram_quantile({q}, sum by ({by}, le) ({buckets}))"


def query(expr: str, legend: str = "", *, instant: bool = False, fmt: str = "") -> Json:
    """One Prometheus query of a panel; its refId is set by the panel."""
    target: Json = {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto"}
    target["instant"], target["range"] = instant, not instant
    if fmt:
        target["format"] = fmt
    return target


def panel(
    kind: str,
    title: str,
    description: str,
    targets: Sequence[Json],
    *,
    unit: Json,
    options: Json | None = None,
    custom: Json | None = None,
    mappings: Sequence[Json] = (),
    overrides: Sequence[Json] = (),
    transformations: Sequence[Json] = (),
) -> Json:
    """A panel without its id and position (``layout`` assigns those)."""
    defaults: Json = {**unit, "color": {"mode": "palette-classic"}}
    if mappings:
        defaults["mappings"] = list(mappings)
        defaults["color"] = {"mode": "thresholds"}
        defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": "green", "value": None}]}
    if custom:
        defaults["custom"] = custom
    result: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)],
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides)},
        "options": options or {},
    }
    if transformations:
        result["transformations"] = list(transformations)
    return result


def stat(title: str, description: str, expr: str, legend: str = "", **kw: Any) -> Json:
    """A single-number panel showing the last value of each series of ``expr``."""
    options = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value",
        "graphMode": "none",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
    }
    return panel("stat", title, description, [query(expr, legend)], options=options, **kw)


def timeseries(
    title: str, description: str, targets: Sequence[Json], *, bars: bool = False, **kw: Any
) -> Json:
    """A graph over time; ``bars`` stacks counts per interval instead of drawing lines."""
    custom: Json = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "showPoints": "never"}
    if bars:
        custom = {"drawStyle": "bars", "fillOpacity": 80, "stacking": {"mode": "normal"}}
    options = {
        "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return panel("timeseries", title, description, targets, options=options, custom=custom, **kw)


def timeline(title: str, description: str, expr: str, legend: str, **kw: Any) -> Json:
    """A state timeline: one band per series, coloured by value mappings."""
    options = {
        "showValue": "never",
        "mergeValues": True,
        "rowHeight": 0.8,
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False},
        "tooltip": {"mode": "single"},
    }
    return panel("state-timeline", title, description, [query(expr, legend)], options=options, **kw)


def threshold_style(word: str) -> Json:
    """Series whose legend contains ``word`` drawn as dashed red threshold lines."""
    return {
        "matcher": {"id": "byRegexp", "options": f".*{word}.*"},
        "properties": [
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
            {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}},
        ],
    }


def per_k(metric: str, title: str, description: str, legend: str) -> Json:
    """A graph of a cut-off metric, one line per k."""
    return timeseries(
        title, description, [query(latest(f"ragcanary_{metric}"), legend)], unit=RATIO
    )


def variable(name: str, label: str, definition: str, *, multi: bool) -> Json:
    """A query variable over the label values Prometheus knows, refreshed with the time range."""
    result: Json = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": definition,
        "query": {"query": definition, "refId": f"{name}-values"},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        "current": {},
        "options": [],
        "hide": 0,
    }
    if multi:
        result["allValue"] = ".*"
    return result


def templating(*, one_suite: bool) -> Json:
    """The variables of every dashboard: the data source, ``suite`` and ``target``, and the
    hidden ``ui_url`` the links to the daemon's pages start with."""
    datasource = {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "current": {"text": "Prometheus", "value": DATASOURCE_UID},
        "refresh": 1,
        "regex": "",
        "hide": 0,
        "options": [],
    }
    suite = variable(
        "suite", "Suite", "label_values(ragcanary_runs_total, suite)", multi=not one_suite
    )
    target = variable(
        "target",
        "Target",
        'label_values(ragcanary_runs_total{suite=~"$suite"}, target)',
        multi=True,
    )
    # Sorted like the alerts' ui_url annotation: several URLs (a rollout), the first of them.
    ui_url = {**variable("ui_url", "UI URL", UI_QUERY, multi=False), "hide": 2}
    return {"list": [datasource, suite, target, ui_url]}


def ui_links(p: Json, *, one_suite: bool) -> Json:
    """``p`` with data links to the pages of the pair each value belongs to, where it has one:
    a table row's pair, or a series' (one-suite dashboards take the suite from ``$suite``)."""
    if p["type"] == "table":
        pair = "suite=${__data.fields.suite:percentencode}"
        pair += "&target=${__data.fields.target:percentencode}"
        pages = [
            ("Newest run", f"{UI}/ui/latest?{pair}"),
            ("Diff with the baseline", f"{UI}/ui/diff?{pair}"),
        ]
    elif p["type"] in LINKED_PANELS and all(
        "{{target}}" in t["legendFormat"] and (one_suite or "{{suite}}" in t["legendFormat"])
        for t in p["targets"]
    ):
        suite = "${suite:percentencode}" if one_suite else "${__field.labels.suite:percentencode}"
        pair = f"suite={suite}&target=${{__field.labels.target:percentencode}}"
        pages = [("Newest run", f"{UI}/ui/latest?{pair}")]
        if p["type"] in ("timeseries", "state-timeline"):  # a point in time was clicked
            pages.append(("Run at this time", f"{UI}/ui/latest?{pair}&at=${{__value.time}}"))
        pages.append(("Diff with the baseline", f"{UI}/ui/diff?{pair}"))
    else:
        return p
    links = [
        {"title": f"{title} (ragcanary UI)", "url": url, "targetBlank": True}
        for title, url in pages
    ]
    defaults = {**p["fieldConfig"]["defaults"], "links": links}
    return {**p, "fieldConfig": {**p["fieldConfig"], "defaults": defaults}}


def alert_annotations() -> Json:
    """Grafana's own annotations and the firing ragcanary alerts of the selected pairs."""
    builtin = {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    alerts = {
        "name": "ragcanary alerts",
        "datasource": DATASOURCE,
        "enable": True,
        "hide": False,
        "iconColor": "red",
        "expr": ALERTS,
        "step": "1m",
        "titleFormat": "{{alertname}}",
        "textFormat": "{{suite}} / {{target}} ({{severity}})",
        "tagKeys": "alertname,severity",
        "useValueForTime": False,
    }
    # Declared changes (issue 38): while a change window holds a selected pair's alerts, a
    # region marks it, so a dip inside it reads as the planned change it is.
    windows = {
        "name": "ragcanary change windows",
        "datasource": DATASOURCE,
        "enable": True,
        "hide": False,
        "iconColor": "purple",
        "expr": f"max without ({REPLICA_LABELS}) (ragcanary_maintenance{{{PAIR}}}) == 1",
        "step": "1m",
        "titleFormat": "change window",
        "textFormat": "{{suite}} / {{target}}: alerts held (ragcanary change list)",
        "tagKeys": "suite,target",
        "useValueForTime": False,
    }
    return {"list": [builtin, alerts, windows]}


def layout(rows: Sequence[tuple[int, Sequence[Json]]]) -> list[Json]:
    """Number the panels and place each row's panels side by side, equally wide."""
    placed: list[Json] = []
    y = 0
    for height, panels in rows:
        width = 24 // len(panels)
        for i, p in enumerate(panels):
            grid = {"h": height, "w": width, "x": i * width, "y": y}
            placed.append({"id": len(placed) + 1, "gridPos": grid, **p})
        y += height
    return placed


def dashboard(
    uid: str,
    title: str,
    description: str,
    rows: Sequence[tuple[int, Sequence[Json]]],
    *,
    one_suite: bool,
) -> Json:
    """A whole dashboard in Grafana's JSON model."""
    rows = [(height, [ui_links(p, one_suite=one_suite) for p in ps]) for height, ps in rows]
    # The daemon's own pages: the fleet, or the suite's pairs on it.
    fleet_page = f"{UI}/ui/?suite=${{suite:percentencode}}" if one_suite else f"{UI}/ui/"
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": [TAG],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "refresh": "1m",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "type": "dashboards",
                "title": "ragcanary",
                "tags": [TAG],
                "asDropdown": False,
                "includeVars": True,
                "keepTime": True,
                "icon": "external link",
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            },
            {
                "type": "link",
                "title": "ragcanary UI",
                "url": fleet_page,
                "asDropdown": False,
                "includeVars": False,  # the pages take suite= and target=, not var-suite=
                "keepTime": False,
                "icon": "external link",
                "targetBlank": True,
                "tooltip": "The daemon's pages: runs, diffs with the baseline, canaries over time",
                "tags": [],
            },
        ],
        "annotations": alert_annotations(),
        "templating": templating(one_suite=one_suite),
        "panels": layout(rows),
    }


def runs_by_outcome(legend: str, by: str) -> Json:
    return timeseries(
        "Runs by outcome",
        "Runs per interval: ok, regression (quality verdict) or unavailable (coverage under "
        "min_coverage; an outage, not a quality drop).",
        [query(increase("ragcanary_runs_total", by), legend)],
        bars=True,
        unit=COUNT,
    )


def overview() -> Json:
    """Every suite on every target at a glance."""
    pair = "{{suite}} · {{target}}"
    table_columns = [
        ("Regression", "ragcanary_regression", VERDICT_MAPPINGS, COUNT),
        ("Coverage", "ragcanary_coverage_ratio", (), RATIO),
        ("MRR", "ragcanary_mrr", (), RATIO),
        ("Rank overlap", "ragcanary_rank_overlap", (), RATIO),
        ("Negative leaks", "ragcanary_negative_leaks", (), COUNT),
    ]
    ages = [
        ("Since last run", "time() - " + fleet(sel("ragcanary_last_run_timestamp_seconds"))),
        (
            "Since last success",
            "time() - " + fleet(sel("ragcanary_last_success_timestamp_seconds")),
        ),
    ]
    columns = [
        (name, latest(metric, answered=metric != "ragcanary_coverage_ratio"), m, u)
        for name, metric, m, u in table_columns
    ]
    columns += [(name, expr, (), SECONDS) for name, expr in ages]
    # One row per pair: without __name__, instance and job the merge joins the columns.
    columns = [(name, f"max by (suite, target) ({expr})", m, u) for name, expr, m, u in columns]
    refs = [chr(ord("A") + i) for i in range(len(columns))]
    table = panel(
        "table",
        "Every suite and target",
        "The last run of each pair: verdict, share of canaries answered, MRR, mean RBO vs "
        "the baseline, negative canaries that leaked, and how long ago it last ran and last "
        "had an answered run.",
        [query(expr, instant=True, fmt="table") for _, expr, _, _ in columns],
        unit={},
        options={"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
        overrides=[
            {
                "matcher": {"id": "byName", "options": name},
                "properties": [{"id": key, "value": value} for key, value in unit.items()]
                + ([{"id": "mappings", "value": list(mappings)}] if mappings else [])
                + (
                    [{"id": "custom.cellOptions", "value": {"type": "color-background"}}]
                    if mappings
                    else []
                ),
            }
            for name, _, mappings, unit in columns
        ],
        transformations=[
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True},
                    "renameByName": {
                        f"Value #{ref}": name for ref, (name, *_) in zip(refs, columns, strict=True)
                    },
                    "indexByName": {
                        "suite": 0,
                        "target": 1,
                        **{f"Value #{ref}": i + 2 for i, ref in enumerate(refs)},
                    },
                },
            },
        ],
    )
    stats = [
        stat(
            "Pairs watched",
            "Suite and target pairs the daemons run.",
            f"count(group by (suite, target) ({sel('ragcanary_runs_total')}))",
            unit=COUNT,
        ),
        stat(
            "In regression",
            "Pairs whose last answered run was a regression.",
            f"sum({latest('ragcanary_regression')})",
            unit=COUNT,
        ),
        stat(
            "Lowest coverage",
            "The smallest share of canaries answered in a last run.",
            f"min({latest('ragcanary_coverage_ratio', answered=False)})",
            unit=RATIO,
        ),
        stat(
            "Oldest last run",
            "The longest time since a pair last ran; RagCanaryStale watches this.",
            f"max(time() - {fleet(sel('ragcanary_last_run_timestamp_seconds'))})",
            unit=SECONDS,
        ),
        stat(
            "Firing alerts",
            "ragcanary alerts firing now for the selected pairs (0 when none).",
            f"count({ALERTS}) or vector(0)",
            unit=COUNT,
        ),
        stat(
            "Config reload",
            "Whether each daemon accepted its last configuration reload.",
            "min(ragcanary_config_last_reload_successful)",
            unit=COUNT,
            mappings=RELOAD_MAPPINGS,
        ),
    ]
    rows = [
        (4, stats),
        (9, [table]),
        (
            8,
            [
                per_k(
                    "hit_rate",
                    "Hit rate @k",
                    "Weighted Hit@k of the last answered run, per pair and k.",
                    pair + " @{{k}}",
                ),
                timeline(
                    "Regression verdict",
                    "1 (red) while the pair's last answered run was a regression.",
                    latest("ragcanary_regression"),
                    pair,
                    unit=COUNT,
                    mappings=VERDICT_MAPPINGS,
                ),
            ],
        ),
        (
            8,
            [
                timeseries(
                    "Coverage",
                    "Share of canaries answered; under min_coverage the run is unavailable.",
                    [query(latest("ragcanary_coverage_ratio", answered=False), pair)],
                    unit=RATIO,
                ),
                timeseries(
                    "Time since last run and last success",
                    "Seconds since each pair last ran, and since it last had an answered run.",
                    [query(expr, f"{pair} {name.lower()}") for name, expr in ages],
                    unit=SECONDS,
                ),
            ],
        ),
        (
            8,
            [
                timeseries(
                    "SLO error budget left",
                    "Share of each quality SLO's error budget left over its window (slo: in "
                    "the config, docs/slo.md): 100 % untouched, 0 spent, below 0 overspent. "
                    "Read by the daemons from the stored runs; no line while the window holds "
                    "no answered canary.",
                    [query(fleet(sel("ragcanary_slo_budget_remaining")), pair)],
                    unit=DELTA,
                ),
                timeseries(
                    "SLO burn rate",
                    "How many times as fast as its SLO allows each pair spends its budget, "
                    "over the last hour and 6 hours: 1 spends it exactly in the window; the "
                    "page fires above 14.4 (1 h and 5 min), the ticket above 6 (6 h and 30 min).",
                    [query(fleet(sel("ragcanary_slo_burn_rate")), pair + " {{window}}")],
                    unit=BURN,
                ),
            ],
        ),
        (
            8,
            [
                runs_by_outcome(pair + " {{outcome}}", "suite, target, outcome"),
                timeseries(
                    "Skipped runs",
                    "Scheduled runs skipped because the previous run of the pair was still "
                    "going: the schedule is tighter than a run takes.",
                    [query(increase("ragcanary_runs_skipped_total", "suite, target"), pair)],
                    bars=True,
                    unit=COUNT,
                ),
            ],
        ),
    ]
    return dashboard(
        "ragcanary-overview",
        "ragcanary / Fleet overview",
        "Every suite on every target: verdict, quality, coverage, freshness, alerts.",
        rows,
        one_suite=False,
    )


def suite() -> Json:
    """One suite in depth: every metric per k, coverage, latency and outcomes."""
    at_k = "{{target}} @{{k}}"
    titles = {
        "hit_rate": ("Hit rate @k", "Share of labelled canaries with a relevant id in the top k."),
        "ndcg": ("NDCG @k", "Graded ranking quality of the top k (ideal DCG from all judged ids)."),
        "recall": ("Recall @k", "Share of all judged relevant ids found in the top k."),
        "precision": ("Precision @k", "Relevant ids in the top k divided by k, like trec_eval."),
    }
    cut_off = [per_k(m, *titles[m], at_k) for m in CUT_OFF_METRICS]
    # The suite's absolute floors (thresholds.hit_rate) as dashed lines beside the rates.
    cut_off[0]["targets"].append(
        {
            **query(
                fleet(sel("ragcanary_threshold", ', name=~"hit_rate@.*"')),
                "{{target}} floor {{name}}",
            ),
            "refId": "B",
        }
    )
    cut_off[0]["fieldConfig"]["overrides"].append(threshold_style("floor"))
    stats = [
        stat(
            "Verdict",
            "The verdict of the last answered run of each target.",
            latest("ragcanary_regression"),
            "{{target}}",
            unit=COUNT,
            mappings=VERDICT_MAPPINGS,
        ),
        stat(
            "Coverage",
            "Share of canaries answered in the last run.",
            latest("ragcanary_coverage_ratio", answered=False),
            "{{target}}",
            unit=RATIO,
        ),
        stat(
            "MRR",
            "Weighted mean reciprocal rank.",
            latest("ragcanary_mrr"),
            "{{target}}",
            unit=RATIO,
        ),
        stat(
            "Negative leaks",
            "Negative canaries that scored at or over their max_score.",
            latest("ragcanary_negative_leaks"),
            "{{target}}",
            unit=COUNT,
        ),
        stat(
            "Regressed cases",
            "Canaries that scored worse than in the baseline.",
            latest("ragcanary_regressed_cases"),
            "{{target}}",
            unit=COUNT,
        ),
        stat(
            "Since last run",
            "Seconds since the target last ran this suite.",
            "time() - " + fleet(sel("ragcanary_last_run_timestamp_seconds")),
            "{{target}}",
            unit=SECONDS,
        ),
    ]
    latency = "ragcanary_query_duration_seconds"
    heatmap = panel(
        "heatmap",
        "Query latency",
        "Answered canary queries per latency bucket and interval.",
        [
            query(
                f"sum by (le) (increase({sel(latency + '_bucket')}[$__rate_interval]))",
                "{{le}}",
                fmt="heatmap",
            )
        ],
        unit={},
        options={
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "steps": 64},
            "yAxis": {"unit": "s", "axisPlacement": "left"},
            "rowsFrame": {"layout": "auto"},
            "cellValues": {"unit": "short"},
            "tooltip": {"mode": "single", "yHistogram": True},
            "legend": {"show": True},
            "showValue": "never",
        },
    )
    quantiles = [
        query(quantile(q, latency, "target"), f"{{{{target}}}} p{round(q * 100)}")
        for q in (0.5, 0.95, 0.99)
    ]
    run_duration = [
        query(quantile(q, "ragcanary_run_duration_seconds", "target"), f"{{{{target}}}} {name}")
        for q, name in ((0.5, "p50"), (0.95, "p95"))
    ]
    rows = [
        (4, stats),
        (8, cut_off[:2]),
        (8, cut_off[2:]),
        (
            8,
            [
                timeseries(
                    "MRR",
                    "Weighted reciprocal rank of the first relevant id within depth.",
                    [query(latest("ragcanary_mrr"), "{{target}}")],
                    unit=RATIO,
                ),
                timeseries(
                    "Coverage",
                    "Share of canaries answered; under min_coverage the run is unavailable.",
                    [query(latest("ragcanary_coverage_ratio", answered=False), "{{target}}")],
                    unit=RATIO,
                ),
            ],
        ),
        (
            8,
            [
                heatmap,
                timeseries(
                    "Query latency quantiles",
                    "Latency of answered canary queries; RagCanarySlowQueries watches p95.",
                    quantiles,
                    unit=SECONDS,
                ),
            ],
        ),
        (
            8,
            [
                timeseries(
                    "Queries by outcome",
                    "Canary queries per interval: ok, empty, or why they were not answered.",
                    [
                        query(
                            increase("ragcanary_queries_total", "target, outcome"),
                            "{{target}} {{outcome}}",
                        )
                    ],
                    bars=True,
                    unit=COUNT,
                ),
                timeseries(
                    "Run duration",
                    "Wall time of a whole run (all canaries of the suite on one target).",
                    run_duration,
                    unit=SECONDS,
                ),
            ],
        ),
        (
            8,
            [
                runs_by_outcome("{{target}} {{outcome}}", "target, outcome"),
                timeseries(
                    "Negative leaks",
                    "Negative canaries (off-topic queries) that scored at or over max_score.",
                    [query(latest("ragcanary_negative_leaks"), "{{target}}")],
                    unit=COUNT,
                ),
                timeseries(
                    "Stale labels",
                    "Relevant ids no canary got back in the suite's last stale_label_runs "
                    "runs: deleted or re-chunked documents; `ragcanary validate --live` names "
                    "them.",
                    [query(latest("ragcanary_stale_labels"), "{{target}}")],
                    unit=COUNT,
                ),
            ],
        ),
    ]
    return dashboard(
        "ragcanary-suite",
        "ragcanary / Suite in depth",
        "One suite on its targets: every metric per k, coverage, latency, outcomes.",
        rows,
        one_suite=True,
    )


def drift() -> Json:
    """What moved against the baseline: scores, rankings, metric deltas, regressed cases."""
    stats = [
        stat(
            "Rank overlap",
            "Mean RBO of the top-k vs the baseline (1 = same rankings).",
            latest("ragcanary_rank_overlap"),
            "{{target}}",
            unit=RATIO,
        ),
        stat(
            "Score drift",
            "Mean |score delta| of ids in both the run and the baseline.",
            latest("ragcanary_score_drift"),
            "{{target}}",
            unit=SCORE,
        ),
        stat(
            "Drifted pairs",
            "Share of (case, id) pairs whose score moved over the score_drift threshold.",
            latest("ragcanary_score_drifted_ratio"),
            "{{target}}",
            unit=RATIO,
        ),
        stat(
            "Top-1 score",
            "Mean score of the first hit.",
            latest("ragcanary_top_score"),
            "{{target}}",
            unit=SCORE,
        ),
        stat(
            "Regressed cases",
            "Canaries that scored worse than in the baseline.",
            latest("ragcanary_regressed_cases"),
            "{{target}}",
            unit=COUNT,
        ),
        stat(
            "Verdict",
            "The verdict of the last answered run of each target.",
            latest("ragcanary_regression"),
            "{{target}}",
            unit=COUNT,
            mappings=VERDICT_MAPPINGS,
        ),
    ]
    delta_now = panel(
        "bargauge",
        "Baseline delta now",
        "Each aggregate metric of the last answered run minus the baseline's.",
        [query(latest("ragcanary_baseline_delta"), "{{target}} {{metric}}", instant=True)],
        unit={**DELTA, "min": -1, "max": 1},
        options={
            "displayMode": "basic",
            "orientation": "horizontal",
            "showUnfilled": True,
            "valueMode": "color",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        },
    )
    delta_groups = [
        ("Baseline delta: hit rate and MRR", 'metric=~"hit_rate@.*|mrr"'),
        (
            "Baseline delta: NDCG, recall, precision, MAP",
            'metric=~"(ndcg|recall|precision|map)@.*"',
        ),
    ]
    # The verdict fails a drop larger than max_drop (if beyond noise): drawn at -max_drop.
    max_drop = query(
        "-" + fleet(sel("ragcanary_threshold", ', name="max_drop"')), "{{target}} -max_drop"
    )
    deltas = [
        timeseries(
            title,
            "Aggregate metric of each run minus the baseline's; negative is worse. The dashed "
            "line is the suite's -max_drop.",
            [
                query(latest("ragcanary_baseline_delta", ", " + matcher), "{{target}} {{metric}}"),
                max_drop,
            ],
            unit=DELTA,
            overrides=[threshold_style("max_drop")],
        )
        for title, matcher in delta_groups
    ]
    rows = [
        (4, stats),
        (
            8,
            [
                timeseries(
                    "Score drift",
                    "Mean |score delta| vs the baseline; a jump with stable rankings points "
                    "at an embedding model or scoring change.",
                    [query(latest("ragcanary_score_drift"), "{{target}}")],
                    unit=SCORE,
                ),
                timeseries(
                    "Drifted pairs",
                    "Share of (case, id) pairs whose score moved over the threshold.",
                    [query(latest("ragcanary_score_drifted_ratio"), "{{target}}")],
                    unit=RATIO,
                ),
            ],
        ),
        (
            8,
            [
                timeseries(
                    "Rank overlap (RBO)",
                    "Mean rank-biased overlap of the top-k vs the baseline; the dashed line is "
                    "the suite's min_rank_overlap.",
                    [
                        query(latest("ragcanary_rank_overlap"), "{{target}}"),
                        query(
                            fleet(sel("ragcanary_threshold", ', name="min_rank_overlap"')),
                            "{{target}} min_rank_overlap",
                        ),
                    ],
                    unit=RATIO,
                    overrides=[threshold_style("min_rank_overlap")],
                ),
                timeseries(
                    "Top-1 score",
                    "Mean score of the first hit of the answered canaries.",
                    [query(latest("ragcanary_top_score"), "{{target}}")],
                    unit=SCORE,
                ),
            ],
        ),
        (
            8,
            [
                timeseries(
                    "Embedding drift",
                    "1 - mean cosine of the canaries' query vectors with the baseline's (targets "
                    "with embedding:); above 0 the embedding endpoint serves another model. The "
                    "dashed line is the suite's embedding_drift threshold.",
                    [
                        query(latest("ragcanary_embedding_drift"), "{{target}}"),
                        query(
                            fleet(sel("ragcanary_threshold", ', name="embedding_drift"'))
                            + " and on (suite, target) "
                            + latest("ragcanary_embedding_drift"),
                            "{{target}} embedding_drift",
                        ),
                    ],
                    unit=RATIO,
                    overrides=[threshold_style("embedding_drift")],
                ),
                timeseries(
                    "Query vectors moved",
                    "Share of canaries whose query vector moved (cosine < 0.999): a whole new "
                    "model moves all of them.",
                    [query(latest("ragcanary_embedding_changed_ratio"), "{{target}}")],
                    unit=RATIO,
                ),
            ],
        ),
        (8, deltas),
        (
            8,
            [
                delta_now,
                timeseries(
                    "Regressed cases",
                    "Canaries worse than in the baseline; `ragcanary diff` lists them.",
                    [query(latest("ragcanary_regressed_cases"), "{{target}}")],
                    unit=COUNT,
                ),
            ],
        ),
    ]
    return dashboard(
        "ragcanary-drift",
        "ragcanary / Drift investigation",
        "What moved against the baseline: scores, rankings, per-metric deltas, regressed cases.",
        rows,
        one_suite=True,
    )


def dashboards() -> dict[str, Json]:
    """Every dashboard by its file name in grafana/dashboards/."""
    return {"overview.json": overview(), "suite.json": suite(), "drift.json": drift()}


def queries(board: Json) -> Iterator[tuple[str, str]]:
    """(panel title, expr) of every query of ``board``'s panels, in panel order."""
    for p in board["panels"]:
        for target in p["targets"]:
            yield p["title"], target["expr"]


def instantiate(
    expr: str, *, rate_interval: str = "1m", suite: str = ".*", target: str = ".*"
) -> str:
    """``expr`` as Grafana sends it to Prometheus, by default with All suites and targets chosen."""
    for name, value in (
        ("$__rate_interval", rate_interval),
        ("$suite", suite),
        ("$target", target),
    ):
        expr = expr.replace(name, value)
    return expr


def render(board: Json) -> str:
    """The committed text of a dashboard: stable key order, two-space indent, final newline."""
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"


def stale(directory: Path = DASHBOARDS_DIR) -> Iterator[str]:
    """Names of the dashboard files in ``directory`` that differ from the generator's output."""
    for name, board in dashboards().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render(board):
            yield name


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args(argv)
    if args.check:
        outdated = list(stale())
        for name in outdated:
            print(f"grafana/dashboards/{name} is out of date; run: python grafana/build.py")
        return 1 if outdated else 0
    DASHBOARDS_DIR.mkdir(exist_ok=True)
    for name, board in dashboards().items():
        (DASHBOARDS_DIR / name).write_text(render(board), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
