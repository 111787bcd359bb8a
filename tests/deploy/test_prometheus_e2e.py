"""Alert rules and dashboards against a real Prometheus scraping a real daemon (issues 4 and 12).

One stack serves the whole module: the demo retriever behind a proxy that can reorder its
answers (tests/reorder_proxy.py), `ragcanary serve` on the demo suite every second, and
Prometheus scraping it every second with deploy/prometheus/alerts.yml, where only `for:` is
shortened to 1s (and the slow-slide window to seconds) so the real expressions are what
fires. Beside the demo suite, a suite searches a second retriever by vector, each canary
embedded first by a test embedding endpoint whose model a scenario swaps. Each scenario
starts from a calm stack (retriever normal, nothing active), breaks the retriever through
its /mode endpoint, the proxy or the embedding endpoint, and watches /api/v1/alerts.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from daemon_harness import DaemonProcess, free_port, running
from prometheus_server import POLL_S, PrometheusServer, prometheus_binary
from reorder_proxy import ReorderProxy
from retrievers import DEFAULT_API_KEY, EmbeddingServer, FakeRetriever, graded_corpus, target_entry

from ragcanary.cli.serving import write_demo_config
from ragcanary.demo.retriever import BackgroundServer

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARDS = ROOT / "grafana" / "dashboards"
SUITE, TARGET = "demo", "demo-bm25"  # the names write_demo_config gives
# The vector suite sorts before "demo": dashboards show their first suite, and so a target with
# embedding: whose embedding panels have data.
VECTOR_SUITE, VECTOR_TARGET = "ann", "vector-db"
VECTOR_QUERIES = [f"vector question {i:02d}" for i in range(12)]
QUALITY = {
    "RagCanaryHitRateDrop",
    "RagCanaryScoreDrift",
    "RagCanaryRankChurn",
    "RagCanaryNegativeLeak",
}
# The daemon's ui_url (by its name, where the fallback would be its listen address 127.0.0.1).
UI_HOST = "localhost"
ADMIN = "adm-prometheus-e2e-41c"
DEADLINE_S = 60.0  # for a few runs of a 1s schedule to reach an alert, on a loaded machine
# Grafana's built-in variables, as it would fill them for this short-lived stack.
GRAFANA_BUILTINS = {"__rate_interval": "1m", "__interval": "2s", "__interval_ms": "2000"}

pytestmark = pytest.mark.slow


@dataclass
class Stack:
    retriever: BackgroundServer
    proxy: ReorderProxy  # between the daemon and the retriever
    daemon: DaemonProcess
    prometheus: PrometheusServer
    embedder: EmbeddingServer  # embeds the vector suite's canaries
    started: float  # Unix time the stack came up, the start of the dashboards' time range

    @property
    def ui_url(self) -> str:
        """The base URL the daemon is configured to link its pages from (RAGCANARY_UI_URL)."""
        return f"http://{UI_HOST}:{self.daemon.port}"

    def set_mode(self, mode: str) -> None:
        response = httpx.post(f"{self.retriever.url}/mode", json={"mode": mode}, timeout=10)
        assert response.status_code == 200, response.text

    def wait_for(self, check: Callable[[], object], what: str) -> None:
        """Poll ``check`` until it is truthy; a timeout shows the daemon's and Prometheus's logs."""
        try:
            self.prometheus.wait_for(check, DEADLINE_S, what)
        except AssertionError as exc:
            tail = "\n".join(self.daemon.log.splitlines()[-20:])
            raise AssertionError(f"{exc}\n--- daemon log (tail) ---\n{tail}") from None

    def wait_state(self, alert: str, state: str, seen: set[str]) -> None:
        """Wait until ``alert`` is in ``state``, adding every alert active meanwhile to ``seen``."""

        def reached() -> bool:
            active = self.prometheus.active()
            seen.update(active)
            return active.get(alert) == state

        self.wait_for(reached, f"{alert} to be {state}")

    def calm(self) -> None:
        """Put the retriever back to normal; wait for an answered run equal to the baseline
        in Prometheus, and for no alert to be active."""
        self.set_mode("normal")
        self.proxy.demote = False
        self.embedder.model = "toy-1"
        # The rules' fleet view carries no instance (replicas are aggregated away).
        healthy = (
            f'ragcanary_rank_overlap{{suite="{SUITE}"}} == 1'
            f" and ragcanary_regression == 0"
            f" and ignoring (instance) ragcanary:last_run_answered == 1"
        )
        # And the vector suite answered since the daemon (re)started: its series, on which the
        # dashboards open, are in the latest scrape.
        vectors = f'ragcanary:last_run_answered{{suite="{VECTOR_SUITE}"}} == 1'
        self.wait_for(
            lambda: (
                self.prometheus.query(healthy)
                and self.prometheus.query(vectors)
                and not self.prometheus.active()
            ),
            "a healthy run of both suites compared with the baseline and no active alert",
        )


def add_vector_suite(config: Path, retriever: str, embedder: str) -> None:
    """Add to the demo's config a suite that searches ``retriever`` by each canary's vector."""
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document["embeddings"] = {"toy": {"url": embedder, "model": "toy-1"}}
    target = target_entry(retriever, embedding="toy", timeout="5s")
    target["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
    document["targets"][VECTOR_TARGET] = target
    cases = [
        {"id": f"v{i:02d}", "query": q, "relevant": {f"rel-{i}": 2, f"doc-{i}-0": 1}}
        for i, q in enumerate(VECTOR_QUERIES)
    ]
    (config.parent / "vectors.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    document["suites"][VECTOR_SUITE] = {
        "cases": "vectors.yaml",
        "targets": [VECTOR_TARGET],
        "every": "1s",
        "k": [1, 3, 5, 10],
        "thresholds": {"hit_rate": {5: 0.6}},
        "stale_label_runs": 2,  # so the stale labels panel has a value within seconds
        # The dashboards show this first suite: the SLO panels need one (docs/slo.md).
        "slo": {"objective": 0.9, "window": "30d", "good": "hit_rate@5"},
    }
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def shortened_rules(source: Path, destination: Path) -> Path:
    """A copy of the rules file with every ``for:`` cut to 1s and the slow slide's day cut to
    10s (else the scenarios' drops would still weigh on it); expressions stay as they are."""
    document = yaml.safe_load(source.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
            rule["expr"] = rule["expr"].replace("[24h]", "[10s]")
    destination.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return destination


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_binary("prometheus")  # skip (or fail under CI) before starting anything
    directory = tmp_path_factory.mktemp("e2e")
    rules = shortened_rules(ALERTS, directory / "alerts.yml")
    with (
        BackgroundServer(port=0) as retriever,
        ReorderProxy(retriever.search_url) as proxy,
        FakeRetriever(corpus=graded_corpus(VECTOR_QUERIES)) as vector_db,
        EmbeddingServer() as embedder,
    ):
        port = free_port()
        config = write_demo_config(directory / "demo", proxy.port, f"127.0.0.1:{port}", "1s")
        add_vector_suite(config, vector_db.url, embedder.url)
        env = {
            "RAGCANARY_LOG_FORMAT": "json",
            "VENDOR_KEY": DEFAULT_API_KEY,
            "RAGCANARY_UI_URL": f"http://{UI_HOST}:{port}",
            "RAGCANARY_ADMIN_TOKEN": ADMIN,  # to declare changes
        }
        daemon = DaemonProcess(config, port, env=env)
        with running(daemon):
            server = PrometheusServer(directory / "prometheus", [f"127.0.0.1:{port}"], [rules])
            with server as prometheus:
                stack = Stack(retriever, proxy, daemon, prometheus, embedder, time.time())
                stack.wait_for(prometheus.targets_up, "the daemon to be scraped")
                unhealthy = [r for r in prometheus.rules() if r["health"] == "err"]
                assert not unhealthy, f"rules failing to evaluate: {unhealthy}"
                stack.calm()
                yield stack


def test_no_alert_while_the_retriever_is_unchanged(stack: Stack) -> None:
    stack.calm()
    seen: set[str] = set()
    stack.prometheus.watch(8.0, seen)  # several runs, each compared with the baseline
    assert seen == set(), f"alerts active against an unchanged retriever: {seen}"
    evaluated = {r["name"]: r for r in stack.prometheus.rules()}
    assert evaluated["ragcanary:last_run_answered"]["health"] == "ok"


def test_an_outage_fires_target_unavailable_and_no_quality_alert(stack: Stack) -> None:
    stack.calm()
    seen: set[str] = set()
    stack.set_mode("down")
    stack.wait_state("RagCanaryTargetUnavailable", "firing", seen)
    stack.prometheus.watch(3.0, seen)
    assert not seen & QUALITY, f"quality alerts during an outage: {seen & QUALITY}"
    alert = next(
        a
        for a in stack.prometheus.alerts()
        if a["labels"]["alertname"] == "RagCanaryTargetUnavailable"
    )
    assert alert["labels"]["suite"] == SUITE
    assert alert["labels"]["target"] == TARGET
    assert f"suite {SUITE}" in alert["annotations"]["description"]
    assert float(alert["value"]) < 0.9  # the coverage of the last run, under min_coverage


def test_a_score_shift_fires_score_drift_and_not_hit_rate_drop(stack: Stack) -> None:
    stack.calm()
    seen: set[str] = set()
    stack.set_mode("shift-scores")
    stack.wait_state("RagCanaryScoreDrift", "firing", seen)
    stack.prometheus.watch(3.0, seen)
    # Every hit kept its rank, only its score moved: no hit-rate or ranking alert.
    assert not seen & {"RagCanaryHitRateDrop", "RagCanaryRankChurn", "RagCanaryTargetUnavailable"}


def test_a_new_embedding_model_fires_embedding_drift_and_holds_back_nothing_else(
    stack: Stack,
) -> None:
    """Another model behind the embedding endpoint: the query vectors moved from the pinned
    baseline's. The retriever here ignores them, so no quality alert may fire."""
    stack.calm()
    seen: set[str] = set()
    stack.embedder.model = "toy-2"
    stack.wait_state("RagCanaryEmbeddingDrift", "firing", seen)
    stack.prometheus.watch(3.0, seen)
    assert seen == {"RagCanaryEmbeddingDrift"}, seen
    (alert,) = [
        a
        for a in stack.prometheus.alerts()
        if a["labels"]["alertname"] == "RagCanaryEmbeddingDrift"
    ]
    assert (alert["labels"]["suite"], alert["labels"]["target"]) == (VECTOR_SUITE, VECTOR_TARGET)
    assert float(alert["value"]) > 0.5  # unrelated random vectors: cosine near 0
    moved = stack.prometheus.query(f'ragcanary_embedding_changed_ratio{{suite="{VECTOR_SUITE}"}}')
    assert [float(sample["value"][1]) for sample in moved] == [1.0]


def test_lost_documents_fire_hit_rate_drop_which_an_outage_then_silences(stack: Stack) -> None:
    stack.calm()
    seen: set[str] = set()
    stack.set_mode("drop-docs")
    stack.wait_state("RagCanaryHitRateDrop", "firing", seen)
    assert "RagCanaryTargetUnavailable" not in seen
    # Its link opens the diff with the baseline, where the documents that left are shown.
    (alert,) = [
        a for a in stack.prometheus.alerts() if a["labels"]["alertname"] == "RagCanaryHitRateDrop"
    ]
    link = alert["annotations"]["ui_url"]
    assert link == f"{stack.ui_url}/ui/diff?suite={SUITE}&target={TARGET}"
    assert httpx.get(link, timeout=10).status_code == 200
    # Its runbook opens on the same daemon, from the runbooks the package ships.
    runbook = alert["annotations"]["runbook_url"]
    assert runbook == f"{stack.ui_url}/ui/runbooks/RagCanaryHitRateDrop"
    # Its description ends with the cause the run's diagnosis names, which Prometheus looked
    # up in ragcanary:diagnosis: the cause of the daemon's latest report.
    (latest,) = httpx.get(
        f"{stack.daemon.url}/api/v1/runs?suite={SUITE}&target={TARGET}&limit=1", timeout=10
    ).json()["runs"]
    report = httpx.get(f"{stack.daemon.url}/api/v1/runs/{latest['run_id']}", timeout=10).json()
    cause = f"The last run's diagnosis names the cause: {report['diagnosis']['cause']}."
    assert alert["annotations"]["description"].endswith(cause), alert["annotations"]
    page = httpx.get(runbook, timeout=10)
    assert page.status_code == 200, page.text
    assert '<h2 id="check-first">Check first</h2>' in page.text
    # The quality gauges keep the degraded run's values through the outage that follows;
    # the rules must not read them as a still-ongoing hit-rate drop.
    outage: set[str] = set()
    stack.set_mode("down")
    stack.wait_state("RagCanaryTargetUnavailable", "firing", outage)
    during: set[str] = set(stack.prometheus.active())
    stack.prometheus.watch(3.0, during)
    assert not during & QUALITY, f"quality alerts during the outage: {during & QUALITY}"
    held = stack.prometheus.query(f'ragcanary_regression{{suite="{SUITE}"}} == 1')
    assert held, "the regression gauge should still hold the last answered run's verdict"


def test_an_ndcg_only_regression_fires_regression_and_not_hit_rate_drop(stack: Stack) -> None:
    """Relevant documents reordered within the top-k: the verdict pages, with a way to its
    reasons, and no alert claims that Hit@k fell."""
    stack.calm()
    seen: set[str] = set()
    stack.proxy.demote = True
    stack.wait_state("RagCanaryRegression", "firing", seen)
    stack.prometheus.watch(3.0, seen)
    assert "RagCanaryHitRateDrop" not in seen, f"a Hit@k alert for an NDCG regression: {seen}"
    assert not seen & {"RagCanaryTargetUnavailable", "RagCanaryScoreDrift"}, seen
    (alert,) = [
        a for a in stack.prometheus.alerts() if a["labels"]["alertname"] == "RagCanaryRegression"
    ]
    assert alert["labels"]["severity"] == "critical"
    # One alert for the pair, whichever replicas are scraped: no instance label, and the
    # description's API path works on any replica (here the only daemon).
    assert "instance" not in alert["labels"], alert["labels"]
    path = f"/api/v1/runs?suite={SUITE}&target={TARGET}&limit=1"
    assert path in alert["annotations"]["description"]
    # The description's path leads to the run whose failures are NDCG drops and nothing else.
    (latest,) = httpx.get(stack.daemon.url + path, timeout=10).json()["runs"]
    report = httpx.get(f"{stack.daemon.url}/api/v1/runs/{latest['run_id']}", timeout=10).json()
    assert report["outcome"] == "regression"
    failed = {(f["kind"], f["metric"].partition("@")[0]) for f in report["failures"]}
    assert failed == {("drop", "ndcg")}, report["failures"]
    assert all(d == 0 for m, d in report["baseline"]["deltas"].items() if "hit_rate" in m)
    # Its ui_url opens the pair's newest run on the daemon, at the configured base URL.
    link = alert["annotations"]["ui_url"]
    assert link == f"{stack.ui_url}/ui/latest?suite={SUITE}&target={TARGET}"
    page = httpx.get(link, follow_redirects=True, timeout=10)
    assert page.status_code == 200, page.text
    assert [r.status_code for r in page.history] == [307]  # /ui/latest redirects to the run
    run_id = page.url.path.removeprefix("/ui/runs/")
    assert page.url.path == f"/ui/runs/{run_id}", page.url
    shown = httpx.get(f"{stack.daemon.url}/api/v1/runs/{run_id}", timeout=10).json()
    assert (shown["suite"], shown["target"]) == (SUITE, TARGET)
    assert TARGET in page.text


def test_a_declared_reindex_holds_its_alerts_then_its_verdict_and_the_page_follow(
    stack: Stack,
) -> None:
    """Inside a declared window the pair keeps being measured, regresses, and no alert fires
    (every rule ends in `unless ... ragcanary_maintenance == 1`); once it is finished the
    first run after carries the change's verdict, a regression, and the drop pages."""
    stack.calm()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    change = {"kind": "reindex", "description": "rebuild", "targets": [TARGET], "window": "10m"}
    created = stack.daemon.post("/api/v1/changes", json=change, headers=auth)
    assert created.status_code == 201, created.text
    change_id = created.json()["id"]
    held = f'ragcanary_maintenance{{suite="{SUITE}", target="{TARGET}"}} == 1'
    stack.wait_for(lambda: stack.prometheus.query(held), "the pair held in Prometheus")
    stack.set_mode("drop-docs")
    regressed = f'ragcanary_regression{{suite="{SUITE}", target="{TARGET}"}} == 1'
    stack.wait_for(lambda: stack.prometheus.query(regressed), "a regressed run in the window")
    seen: set[str] = set()
    stack.prometheus.watch(6.0, seen)  # several runs and rule evaluations, `for:` is 1s
    assert seen == set(), f"alerts fired inside the change's window: {seen}"
    finished = stack.daemon.post(f"/api/v1/changes/{change_id}/finish", headers=auth)
    assert finished.status_code == 200, finished.text
    stack.wait_state("RagCanaryHitRateDrop", "firing", seen)

    def verdict() -> dict[str, Any] | None:
        found = stack.daemon.get(f"/api/v1/changes/{change_id}").json()["verdicts"]
        mine = [v for v in found if (v["suite"], v["target"]) == (SUITE, TARGET)]
        return mine[0] if mine and mine[0]["verdict"] is not None else None

    stack.wait_for(verdict, "the change's verdict on the first run after it")
    carried = verdict()
    assert carried is not None
    assert carried["verdict"] == "regression", carried
    report = stack.daemon.get(f"/api/v1/runs/{carried['run_id']}").json()
    assert report["change"]["id"] == change_id
    assert report["outcome"] == "regression"


def test_stopping_the_daemon_fires_one_alert_not_one_per_pair(stack: Stack) -> None:
    """RagCanaryDown fires once; staleness, outage and quality alerts stay quiet. The daemon
    is started again afterwards, on the same database, for the tests that follow."""
    stack.calm()
    stack.daemon.stop()
    try:
        seen: set[str] = set()
        stack.wait_state("RagCanaryDown", "firing", seen)
        # What Alertmanager would be sent: alerts that fire. As the stopped daemon's series go
        # stale one scrape apart, a quality rule has been seen pending for one evaluation on a
        # loaded machine (its real for: of an hour never lets that notify); one that fires
        # (here after the shortened 1s) fails the test.
        fired: set[str] = set()
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            active = stack.prometheus.active()
            seen.update(active)
            fired.update(name for name, state in active.items() if state == "firing")
            time.sleep(POLL_S)
        firing = [a for a in stack.prometheus.alerts() if a["state"] == "firing"]
        assert fired == {"RagCanaryDown"}, f"alerts fired while the daemon is stopped: {seen}"
        assert len(firing) == 1, f"{len(firing)} alerts for one stopped daemon: {firing}"
        assert firing[0]["labels"]["instance"] == f"127.0.0.1:{stack.daemon.port}"
    finally:
        stack.daemon.start()
    stack.wait_for(stack.prometheus.targets_up, "the restarted daemon to be scraped")
    stack.calm()


def test_every_dashboard_panel_query_returns_data(stack: Stack) -> None:
    dashboards = sorted(DASHBOARDS.glob("*.json"))
    if not dashboards:
        pytest.fail(f"no dashboards in {DASHBOARDS}")
    stack.calm()
    end = time.time()
    builtins = {**GRAFANA_BUILTINS, "__range": f"{math.ceil(end - stack.started)}s"}
    queried, empty = 0, []
    for path in dashboards:
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        variables = {**builtins, **resolve_variables(stack.prometheus, dashboard)}
        for title, target in panel_targets(dashboard):
            expr = substitute(target["expr"], variables)
            if target.get("instant"):
                result = stack.prometheus.query(expr)
                values = [sample["value"][1] for sample in result]
            else:
                result = stack.prometheus.query_range(expr, stack.started, end, step=2)
                values = [v for series in result for _, v in series["values"]]
            queried += 1
            if not any(v.lower() != "nan" for v in values):
                empty.append(f"{path.name}: {title}: {expr}")
    assert queried > 0, "the dashboards have no panel queries"
    assert not empty, f"{len(empty)} of {queried} panel queries return no data:\n" + "\n".join(
        empty
    )


def panel_targets(dashboard: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(panel title, target) for every Prometheus query of every panel, rows included."""
    stack = list(dashboard.get("panels", []))
    while stack:
        panel = stack.pop(0)
        stack.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield str(panel.get("title", "")), target


LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<selector>.*),)?\s*(?P<label>\w+)\s*\)\s*$")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def resolve_variables(prometheus: PrometheusServer, dashboard: dict[str, Any]) -> dict[str, str]:
    """A value for each template variable, as Grafana would offer it on this stack.

    ``label_values(...)`` queries are answered by Prometheus (the first value, after the
    variables before it are filled in); other variables take their current value.
    """
    values: dict[str, str] = {}
    for variable in dashboard.get("templating", {}).get("list", []):
        name, kind = variable["name"], variable.get("type")
        if kind == "datasource":
            continue
        if kind == "query":
            query = variable.get("query")
            query = query.get("query", "") if isinstance(query, dict) else str(query or "")
            match = LABEL_VALUES.match(substitute(query, values))
            assert match, f"{dashboard.get('title')}: variable {name}: cannot run {query!r}"
            params = {"match[]": match["selector"]} if match["selector"] else {}
            found = sorted(prometheus.api(f"label/{match['label']}/values", **params))
            assert found, f"{dashboard.get('title')}: variable {name} has no values ({query})"
            values[name] = found[0]
        else:
            current = variable.get("current", {}).get("value")
            options = [o.get("value") for o in variable.get("options", [])]
            value = current if current not in (None, "", "$__all") else (options or [""])[0]
            values[name] = str(value[0] if isinstance(value, list) else value)
    return values


def substitute(expr: str, variables: dict[str, str]) -> str:
    """``expr`` with ``$name``, ``${name}``, ``${name:format}`` and ``[[name]]`` filled in."""

    def fill(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return variables.get(name, match.group(0))

    return VARIABLE.sub(fill, expr)
