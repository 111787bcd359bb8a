"""`ragcanary serve` end to end: a subprocess daemon against a real retriever, on both databases.

One daemon per database walks through issue 3's acceptance checks in the order the tests are
written (each test leaves the retriever healthy for the next): schedule and metrics, baseline
accept, drift, lost documents, an outage, reloads, SIGTERM, a restart, the admin API, secrets.
The storage outage has a daemon of its own, on PostgreSQL behind a TCP proxy the test cuts.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import yaml
from daemon_harness import DaemonProcess, Scrape, TcpProxy, free_port, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-live-7f3a9c1e5b"
ADMIN_TOKEN = "adm-4c1d9e77f2"
QUERIES = [f"question {i:02d}" for i in range(30)]
LOST = range(12)  # 40% of the queries lose their relevant document
RUNS_S = 30.0  # deadline for a couple of runs on a 1-second schedule, with room for a slow CI
CORE = {"suite": "core", "target": "vendor"}
OVERRIDES = [f"RAGCANARY_{name}" for name in ("STORAGE", "LISTEN", "ADMIN_TOKEN", "CONFIG")]

# Metrics of docs/metrics.md: name -> (type, label names).
PAIR = frozenset({"suite", "target"})
CONTRACT_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    "ragcanary_hit_rate": ("gauge", PAIR | {"k"}),
    "ragcanary_mrr": ("gauge", PAIR),
    "ragcanary_ndcg": ("gauge", PAIR | {"k"}),
    "ragcanary_recall": ("gauge", PAIR | {"k"}),
    "ragcanary_precision": ("gauge", PAIR | {"k"}),
    "ragcanary_rank_overlap": ("gauge", PAIR),
    "ragcanary_score_drift": ("gauge", PAIR),
    "ragcanary_score_drifted_ratio": ("gauge", PAIR),
    "ragcanary_top_score": ("gauge", PAIR),
    "ragcanary_baseline_delta": ("gauge", PAIR | {"metric"}),
    "ragcanary_regressed_cases": ("gauge", PAIR),
    "ragcanary_negative_leaks": ("gauge", PAIR),
    "ragcanary_regression": ("gauge", PAIR),
    "ragcanary_coverage_ratio": ("gauge", PAIR),
    "ragcanary_runs_total": ("counter", PAIR | {"outcome"}),
    "ragcanary_queries_total": ("counter", PAIR | {"outcome"}),
    "ragcanary_query_duration_seconds": ("histogram", PAIR),
    "ragcanary_run_duration_seconds": ("histogram", PAIR),
    "ragcanary_last_run_timestamp_seconds": ("gauge", PAIR),
    "ragcanary_last_success_timestamp_seconds": ("gauge", PAIR),
    "ragcanary_config_last_reload_successful": ("gauge", frozenset()),
    "ragcanary_build_info": ("gauge", frozenset({"version"})),
    "ragcanary_storage_bytes": ("gauge", frozenset()),  # measured as the daemon starts
}
QUALITY = (
    "ragcanary_hit_rate",
    "ragcanary_ndcg",
    "ragcanary_recall",
    "ragcanary_precision",
    "ragcanary_mrr",
    "ragcanary_regression",
    "ragcanary_rank_overlap",
    "ragcanary_score_drift",
)


def _cases(first: int, count: int) -> dict[str, Any]:
    return {
        "cases": [
            {"id": f"case-{i:02d}", "query": QUERIES[i], "relevant": [f"rel-{i}"]}
            for i in range(first, first + count)
        ]
    }


def _config(storage: str, port: int, url: str, suites: dict[str, Any]) -> dict[str, Any]:
    vendor = target_entry(url, timeout="5s", retries=0)
    return {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": vendor},
        "suites": suites,
    }


CORE_SUITE = {
    "cases": "core.yaml",
    "targets": ["vendor"],
    "every": "1s",
    "k": [1, 3, 5, 10],
    "depth": 10,
    "thresholds": {"max_drop": 0.02, "score_drift": 0.05, "min_rank_overlap": 0.7},
}
SPARE_SUITE = {"cases": "spare.yaml", "targets": ["vendor"], "every": "2s", "k": [1, 5]}
FRESH_SUITE = {"cases": "fresh.yaml", "targets": ["vendor"], "every": "1s", "k": [1, 5]}


@dataclass
class World:
    """A retriever, a config directory and the daemon(s) serving it, shared by one module run."""

    directory: Path
    storage: str
    retriever: FakeRetriever
    port: int
    daemons: list[DaemonProcess] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what earlier scenarios left behind

    @property
    def daemon(self) -> DaemonProcess:
        return self.daemons[-1]

    @property
    def config(self) -> Path:
        return self.directory / "ragcanary.yaml"

    def write_config(self, suites: dict[str, Any]) -> None:
        data = _config(self.storage, self.port, self.retriever.url, suites)
        self.config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    def start(self, **env: str) -> DaemonProcess:
        daemon = DaemonProcess(self.config, self.port, {"VENDOR_KEY": API_KEY, **env})
        self.daemons.append(daemon)
        return daemon.start()

    def cli(self, *args: str) -> Any:
        env: dict[str, str | None] = {"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
        env.update(dict.fromkeys(OVERRIDES))  # None unsets: the test's config must rule
        result = CliRunner().invoke(app, [*args, "-c", str(self.config)], env=env)
        assert result.exit_code == 0, result.output
        return result

    def latest_stored(self, suite: str = "core") -> dict[str, Any]:
        runs = self.daemon.get("/api/v1/runs", suite=suite, target="vendor", limit=1).json()
        return dict(self.daemon.get(f"/api/v1/runs/{runs['runs'][0]['run_id']}").json())

    def heal(self) -> None:
        self.retriever.status = 200
        self.retriever.delay_s = 0.0
        self.retriever.drop_ids = set()
        self.retriever.score_shift = 0.0
        self.retriever.shuffle_top = 0


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def storage(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A storage URL for the daemon: a SQLite file, or a schema of its own on local PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'ragcanary.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    schema = f"daemon_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    url = sqlalchemy.make_url(server).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module")
def world(storage: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("daemon")
    for name, first, count in (("core", 0, 30), ("spare", 0, 5), ("fresh", 5, 5)):
        (directory / f"{name}.yaml").write_text(json.dumps(_cases(first, count)), encoding="utf-8")
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        world = World(directory, storage, retriever, free_port())
        world.write_config({"core": CORE_SUITE, "spare": SPARE_SUITE})
        try:
            world.start()
            yield world
        finally:
            for daemon in world.daemons:
                if daemon.started and daemon.process.poll() is None:
                    daemon.stop()
                daemon.kill()


def _run_events(daemon: DaemonProcess, suite: str = "core") -> list[dict[str, Any]]:
    return [e for e in daemon.events() if e["event"] == "run" and e["suite"] == suite]


def _samples_of(scrape: Scrape, name: str, kind: str) -> list[Any]:
    wanted = f"{name}_bucket" if kind == "histogram" else name
    return [s for s in scrape.samples if s.name == wanted]


def test_runs_happen_on_schedule_and_every_contract_metric_is_exposed(world: World) -> None:
    scrape = world.daemon.wait_runs("core", "vendor", 3, RUNS_S)
    for name, (kind, labels) in CONTRACT_METRICS.items():
        samples = _samples_of(scrape, name, kind)
        assert samples, f"{name} is not exposed"
        for sample in samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample.labels)
    assert scrape.label_values("ragcanary_hit_rate", "k") == {"1", "3", "5", "10"}
    for outcome in ("ok", "regression", "unavailable"):  # counters exist at 0 up front
        assert scrape.value("ragcanary_runs_total", **CORE, outcome=outcome) is not None
    assert scrape.value("ragcanary_queries_total", **CORE, outcome="timeout") == 0

    def five_stored() -> list[dict[str, Any]] | None:
        found = world.daemon.get("/api/v1/runs", suite="core", target="vendor", limit=5)
        runs: list[dict[str, Any]] = found.json()["runs"]
        return runs if len(runs) == 5 else None

    runs = wait_for(five_stored, RUNS_S, "five stored runs of core")
    assert runs is not None
    # Newest four: the very first run may start late, while the process is still warming up.
    starts = sorted(datetime.fromisoformat(r["started_at"]) for r in runs)[1:]
    gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(starts))
    assert 0.8 < gaps[1] < 1.2, gaps  # every second...
    assert all(0.5 < gap < 3.2 for gap in gaps), gaps  # ...or a tick skipped by a slow run
    jobs = {(j["suite"], j["target"]): j for j in world.daemon.get("/api/v1/jobs").json()["jobs"]}
    assert set(jobs) == {("core", "vendor"), ("spare", "vendor")}
    next_run = datetime.fromisoformat(jobs[("core", "vendor")]["next_run_at"])
    assert abs((next_run - datetime.now(UTC)).total_seconds()) < 2


def test_promtool_check_metrics_passes(world: World) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("RAGCANARY_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is not on PATH and RAGCANARY_REQUIRE_PROMTOOL=1")
        pytest.skip("promtool is not on PATH; install Prometheus' promtool to run this check")
    text = world.daemon.scrape().text
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_admin_api_refuses_baseline_changes_when_no_token_is_set(world: World) -> None:
    for headers in ({}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
        response = world.daemon.post("/api/v1/baselines/core/vendor", json={}, headers=headers)
        assert response.status_code == 403
        assert "RAGCANARY_ADMIN_TOKEN" in response.json()["detail"]


def test_unchanged_retriever_after_baseline_accept_shows_no_drift(world: World) -> None:
    output = world.cli("baseline", "accept", "--suite", "core", "--target", "vendor").output
    accepted = output.split("now run ")[1].split()[0]
    world.facts["baseline"] = accepted
    scrape = world.daemon.wait_runs("core", "vendor", 2, RUNS_S)
    assert scrape.value("ragcanary_rank_overlap", **CORE) == pytest.approx(1.0, abs=1e-9)
    assert scrape.value("ragcanary_score_drift", **CORE) == pytest.approx(0.0, abs=1e-9)
    assert scrape.value("ragcanary_regression", **CORE) == 0
    assert scrape.value("ragcanary_regressed_cases", **CORE) == 0
    assert scrape.value("ragcanary_baseline_delta", **CORE, metric="hit_rate@5") == 0
    wait_for(
        lambda: world.latest_stored()["baseline"]["run_id"] == accepted,
        RUNS_S,
        "a stored run compared with the accepted baseline",
    )


def test_lower_scores_and_shuffled_top5_show_as_drift_and_churn_within_two_runs(
    world: World,
) -> None:
    world.retriever.score_shift = -0.15
    world.retriever.shuffle_top = 5
    try:
        scrape = world.daemon.wait_runs("core", "vendor", 2, RUNS_S)
    finally:
        world.heal()
    assert scrape.value("ragcanary_score_drift", **CORE) == pytest.approx(0.15, abs=1e-6)
    assert scrape.value("ragcanary_score_drifted_ratio", **CORE) == pytest.approx(1.0)
    overlap = scrape.value("ragcanary_rank_overlap", **CORE)
    assert overlap is not None
    assert overlap < 0.95
    assert scrape.number("ragcanary_top_score", **CORE) < 0.85


def test_removing_relevant_documents_for_40_percent_of_queries_is_a_regression(
    world: World,
) -> None:
    world.retriever.drop_ids = {f"rel-{i}" for i in LOST}
    try:
        scrape = world.daemon.wait_runs("core", "vendor", 2, RUNS_S)
        wait_for(
            lambda: world.latest_stored()["outcome"] == "regression",
            RUNS_S,
            "a stored regression run",
        )
        # While the documents stay gone, so that "latest" is a run without them.
        table = world.cli("diff", "--suite", "core", "--target", "vendor").output
        diffs = [
            json.loads(world.cli("diff", "--suite", "core", "--target", "vendor", "--json").stdout),
            world.daemon.get("/api/v1/diff", suite="core", target="vendor").json(),
        ]
    finally:
        world.heal()
    assert scrape.value("ragcanary_regression", **CORE) == 1
    assert scrape.value("ragcanary_regressed_cases", **CORE) == len(LOST)
    delta = scrape.value("ragcanary_baseline_delta", **CORE, metric="hit_rate@5")
    assert delta == pytest.approx(-0.4, abs=1e-6)
    lost_cases = {f"case-{i:02d}": f"rel-{i}" for i in LOST}
    assert any(f"{case} " in table for case in lost_cases), table
    assert any(f"{doc} (#" in table for doc in lost_cases.values()), table
    for diff in diffs:
        assert diff["from"]["run_id"] == world.facts["baseline"]
        assert diff["to"]["outcome"] == "regression"
        left = {c["id"]: [e["id"] for e in c["left"]] for c in diff["cases"]}
        assert {c: left.get(c) for c in lost_cases} == {c: [d] for c, d in lost_cases.items()}
        assert diff["metrics"]["hit_rate@5"]["delta"] == pytest.approx(-0.4, abs=1e-6)


def test_outage_gives_coverage_0_and_unavailable_runs_without_touching_hit_rate(
    world: World,
) -> None:
    world.retriever.status = 503
    try:
        world.daemon.wait_runs("core", "vendor", 1, RUNS_S, outcome="unavailable")
        before = world.daemon.scrape()
        after = world.daemon.wait_runs("core", "vendor", 2, RUNS_S, outcome="unavailable")
    finally:
        world.heal()
    assert after.value("ragcanary_coverage_ratio", **CORE) == 0
    for name in QUALITY:
        quality = [s for s in before.samples if s.name == name and s.labels["suite"] == "core"]
        assert quality, name
        for sample in quality:
            assert after.value(name, **sample.labels) == sample.value, sample
    # The first unavailable run may have straddled the switch to 503; the two after it did not.
    failed = after.total("ragcanary_queries_total", **CORE, outcome="http_5xx")
    assert failed - before.total("ragcanary_queries_total", **CORE, outcome="http_5xx") >= 60
    last_success = after.number("ragcanary_last_success_timestamp_seconds", **CORE)
    assert last_success < after.number("ragcanary_last_run_timestamp_seconds", **CORE)
    warnings = [e for e in world.daemon.events() if e["event"] == "queries failed"]
    assert any(w["level"] == "warning" and w["reasons"] == {"http_5xx": 30} for w in warnings)

    def unavailable_runs() -> list[dict[str, Any]]:
        runs = [
            e
            for e in _run_events(world.daemon)
            if e["target"] == "vendor" and e["outcome"] == "unavailable"
        ]
        return runs if len(runs) >= 3 else []

    # A run's log line may reach us after the scrape that counted it. The first unavailable
    # run may have straddled the switch to 503 (some queries answered, coverage above 0), and
    # a fourth may straddle the heal; the second and third ran wholly inside the outage.
    unavailable = wait_for(unavailable_runs, 10.0, "3 unavailable run log lines")
    assert [e["coverage"] for e in unavailable[1:3]] == [0.0, 0.0]


def test_sighup_with_a_bad_config_is_refused_and_the_old_jobs_keep_running(world: World) -> None:
    good = world.config.read_text(encoding="utf-8")
    world.config.write_text(good.replace("every: 1s", "every: 1 fortnight-ish"), encoding="utf-8")
    try:
        world.daemon.signal(signal.SIGHUP)
        wait_for(
            lambda: world.daemon.scrape().value("ragcanary_config_last_reload_successful") == 0,
            RUNS_S,
            "the reload to be refused",
        )
        scrape = world.daemon.wait_runs("core", "vendor", 2, RUNS_S)
    finally:
        world.config.write_text(good, encoding="utf-8")
    assert scrape.value("ragcanary_runs_total", suite="spare", target="vendor", outcome="ok")
    refused = [e for e in world.daemon.events() if e["event"].startswith("config reload rejected")]
    assert len(refused) == 1
    assert refused[0]["level"] == "error"
    assert any("suites.core.every" in p and "fortnight" in p for p in refused[0]["problems"])
    assert world.daemon.get("/readyz").status_code == 200


def test_sighup_with_a_good_config_adds_and_removes_suites(world: World) -> None:
    world.write_config({"core": CORE_SUITE, "fresh": FRESH_SUITE})
    world.daemon.signal(signal.SIGHUP)
    wait_for(
        lambda: world.daemon.scrape().value("ragcanary_config_last_reload_successful") == 1,
        RUNS_S,
        "the reload to be accepted",
    )
    scrape = world.daemon.wait_runs("fresh", "vendor", 1, RUNS_S)
    assert scrape.label_values("ragcanary_runs_total", "suite") == {"core", "fresh"}
    assert "spare" not in {s.labels.get("suite") for s in scrape.samples}
    assert scrape.value("ragcanary_hit_rate", suite="fresh", target="vendor", k="5") == 1
    jobs = world.daemon.get("/api/v1/jobs").json()["jobs"]
    assert {j["suite"] for j in jobs} == {"core", "fresh"}


def _hold_a_core_run(world: World, delay_s: float) -> None:
    """Slow the retriever down and return once a core run is surely in flight."""
    retriever = world.retriever
    seen = len(retriever.requests)
    core_only = set(QUERIES[10:])  # the other suites ask none of these
    retriever.delay_s = delay_s

    def core_query_delayed() -> bool:
        return any(r.body["text"] in core_only for r in retriever.requests[seen:])

    # That query is answered delay_s after it arrived: its run is still going for that long.
    wait_for(core_query_delayed, RUNS_S, "a core run to be held up by the slow retriever")


def test_reload_while_a_run_is_in_flight_leaves_that_run_intact(world: World) -> None:
    daemon = world.daemon
    try:
        _hold_a_core_run(world, 0.4)  # four waves of eight queries: a run of about 1.6 s
        daemon.signal(signal.SIGHUP)

        def next_core_run() -> dict[str, Any] | None:
            events = daemon.events()
            reloads = [i for i, e in enumerate(events) if e["event"] == "config reloaded"]
            if len(reloads) < 2:
                return None
            later = [e for e in events[reloads[-1] :] if e["event"] == "run"]
            return next((e for e in later if e["suite"] == "core"), None)

        finished = wait_for(next_core_run, RUNS_S, "the core run in flight to finish")
    finally:
        world.heal()
    assert finished is not None
    assert finished["outcome"] == "ok", finished
    assert finished["coverage"] == 1.0, finished


def test_sigterm_while_a_run_is_in_flight_finishes_it_and_exits_0(world: World) -> None:
    daemon = world.daemon
    try:
        _hold_a_core_run(world, 0.8)  # four waves of eight queries: a run of about 3 s
        code, elapsed = daemon.stop()
    finally:
        world.heal()
    assert code == 0, daemon.log
    assert elapsed < 10, daemon.log
    events = [e["event"] for e in daemon.events()]
    stopping = events.index("stopping")
    assert "waiting for in-flight runs" in events[stopping:], daemon.log
    assert "run" in events[stopping:], "the in-flight run was not finished"
    assert "run cancelled" not in events
    assert events[-1] == "stopped"
    world.facts["in_flight"] = _run_events(daemon)[-1]["run_id"]


def test_pinned_baseline_survives_a_restart(world: World) -> None:
    daemon = world.start(RAGCANARY_ADMIN_TOKEN=ADMIN_TOKEN)
    pinned = {
        (b["suite"], b["target"]): b["run_id"]
        for b in daemon.get("/api/v1/baselines").json()["baselines"]
    }
    assert pinned[("core", "vendor")] == world.facts["baseline"]
    daemon.wait_runs("core", "vendor", 2, RUNS_S)

    def compared() -> bool:
        latest = world.latest_stored()
        ours = {e["run_id"] for e in _run_events(daemon)}
        return latest["run_id"] in ours and latest["baseline"]["run_id"] == world.facts["baseline"]

    wait_for(compared, RUNS_S, "a run of the restarted daemon compared with the pinned baseline")
    auto_pinned = [e for e in daemon.events() if e["event"].startswith("no baseline pinned yet")]
    assert "core" not in {e["suite"] for e in auto_pinned}
    stored = daemon.get("/api/v1/runs", suite="core", target="vendor", limit=50).json()["runs"]
    assert world.facts["in_flight"] in {r["run_id"] for r in stored}


def test_admin_api_pins_a_baseline_only_with_the_right_token(world: World) -> None:
    daemon, url = world.daemon, "/api/v1/baselines/core/vendor"
    original = world.facts["baseline"]
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": ADMIN_TOKEN[:-1]},
    ):
        assert daemon.post(url, json={}, headers=headers).status_code == 401
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    latest = daemon.post(url, json={}, headers=auth)
    assert latest.status_code == 200, latest.text
    assert latest.json()["run_id"] != original
    assert daemon.post(url, json={"run_id": "no-such-run"}, headers=auth).status_code == 404
    restored = daemon.post(url, json={"run_id": original}, headers=auth)
    assert restored.json() == {"suite": "core", "target": "vendor", "run_id": original}
    baselines = daemon.get("/api/v1/baselines").json()["baselines"]
    assert [b["run_id"] for b in baselines if b["suite"] == "core"] == [original]


def test_logs_are_json_runs_are_summarised_and_no_secret_leaks(world: World) -> None:
    daemon = world.daemon
    assert all(r.headers.get("X-Api-Key") == API_KEY for r in world.retriever.requests)
    runs = daemon.get("/api/v1/runs", limit=1000)
    stored = {r["run_id"]: r["outcome"] for r in runs.json()["runs"]}
    failed = next(run_id for run_id, outcome in stored.items() if outcome == "unavailable")
    responses = [
        runs.text,
        daemon.get("/metrics").text,
        daemon.get("/openapi.json").text,
        daemon.get("/readyz").text,
        daemon.get("/api/v1/jobs").text,
        daemon.get("/api/v1/baselines").text,
        daemon.get(f"/api/v1/runs/{failed}").text,
        daemon.get(f"/api/v1/runs/{world.latest_stored()['run_id']}").text,
        daemon.get("/api/v1/diff", suite="core", target="vendor").text,
        daemon.get("/api/v1/history", suite="core", case="case-00").text,
        daemon.post("/api/v1/baselines/core/vendor", json={}).text,
    ]
    logged = [line for d in world.daemons for line in d.log.splitlines()]
    for text in (*responses, *logged):
        assert API_KEY not in text
        assert ADMIN_TOKEN not in text

    def run_lines() -> list[dict[str, Any]]:
        return [e for d in world.daemons for e in d.events() if e["event"] == "run"]

    wait_for(
        lambda: set(stored) <= {e["run_id"] for e in run_lines()},
        RUNS_S,
        "a run line for every stored run",
    )
    lines = run_lines()
    for line in lines:
        assert {"suite", "target", "outcome", "coverage", "duration_s"} <= set(line), line
    ids = [line["run_id"] for line in lines]
    assert len(ids) == len(set(ids)), "a run was logged twice"
    # A run is logged after it is written, so by now every logged run is stored.
    stored_now = daemon.get("/api/v1/runs", limit=1000).json()["runs"]
    assert set(ids) <= {r["run_id"] for r in stored_now}


def test_sigterm_exits_0_promptly(world: World) -> None:
    code, elapsed = world.daemon.stop()
    assert code == 0, world.daemon.log
    assert elapsed < 5, world.daemon.log
    assert world.daemon.events()[-1]["event"] == "stopped"


@pytest.fixture
def proxied(
    postgres_url: str, tmp_path: Path
) -> Iterator[tuple[DaemonProcess, TcpProxy, FakeRetriever]]:
    """A daemon, not started yet, whose PostgreSQL connections pass through a proxy to cut."""
    direct = sqlalchemy.make_url(postgres_url)
    (tmp_path / "core.yaml").write_text(json.dumps(_cases(0, 10)), encoding="utf-8")
    with (
        FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever,
        TcpProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy,
    ):
        storage = direct.set(port=proxy.port).render_as_string(hide_password=False)
        port = free_port()
        suites = {"core": {**CORE_SUITE, "k": [1, 5], "depth": 5}}
        config = _config(storage, port, retriever.url, suites)
        (tmp_path / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        daemon = DaemonProcess(tmp_path / "ragcanary.yaml", port, {"VENDOR_KEY": API_KEY})
        try:
            yield daemon, proxy, retriever
        finally:
            if daemon.started and daemon.process.poll() is None:
                daemon.stop()
            daemon.kill()


def _runs_pile_up_while_storage_is_down(daemon: DaemonProcess, runs: int) -> list[str]:
    """Wait out ``runs`` runs with storage cut off; the ids of the runs kept in memory."""
    wait_for(lambda: daemon.get("/readyz").status_code == 503, RUNS_S, "/readyz to turn 503")
    assert daemon.get("/api/v1/runs").status_code == 503
    before = daemon.scrape()
    during = daemon.wait_runs("core", "vendor", runs, RUNS_S)
    last_run = "ragcanary_last_run_timestamp_seconds"
    assert during.number(last_run, **CORE) > (before.value(last_run, **CORE) or 0.0)

    def buffered() -> list[str] | None:
        kept = "storage unreachable; run kept in memory"
        ids = [e["run_id"] for e in daemon.events() if e["event"].startswith(kept)]
        return ids if len(ids) >= runs else None  # logged just after the exporter counts it

    ids = wait_for(buffered, RUNS_S, f"{runs} runs kept in memory")
    assert ids is not None
    return ids


def _every_run_is_stored_in_order(daemon: DaemonProcess, postgres_url: str) -> list[str]:
    """Once storage is back: every run the daemon logged is stored, in the order it ran."""
    wait_for(lambda: daemon.get("/readyz").status_code == 200, RUNS_S, "/readyz to turn 200")
    daemon.wait_runs("core", "vendor", 1, RUNS_S)  # the backlog is written before the next run
    logged = [e["run_id"] for e in _run_events(daemon)]

    def all_stored() -> bool:
        runs = daemon.get("/api/v1/runs", limit=1000).json()["runs"]
        return set(logged) <= {r["run_id"] for r in runs}

    wait_for(all_stored, RUNS_S, "every logged run to be stored")
    engine = sqlalchemy.create_engine(postgres_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            # xmin is the id of the transaction that wrote the row: the order rows were saved in.
            written = conn.execute(
                sqlalchemy.text("SELECT run_id FROM runs ORDER BY xmin::text::bigint")
            ).scalars()
            order = [run_id for run_id in written if run_id in set(logged)]
    finally:
        engine.dispose()
    assert order == logged
    return logged


def test_storage_outage_loses_no_run_and_writes_them_in_order(
    proxied: tuple[DaemonProcess, TcpProxy, FakeRetriever], postgres_url: str
) -> None:
    daemon, proxy, _ = proxied
    daemon.start()
    daemon.wait_runs("core", "vendor", 2, RUNS_S)
    proxy.stop()
    try:
        buffered = _runs_pile_up_while_storage_is_down(daemon, 3)
    finally:
        proxy.start()
    logged = _every_run_is_stored_in_order(daemon, postgres_url)
    assert set(buffered) <= set(logged)
    assert logged[:2] != buffered[:2]  # runs were stored before the outage too


def test_daemon_started_while_storage_is_down_stores_its_runs_once_it_returns(
    proxied: tuple[DaemonProcess, TcpProxy, FakeRetriever], postgres_url: str
) -> None:
    daemon, proxy, retriever = proxied
    proxy.stop()
    try:
        daemon.start()
        buffered = _runs_pile_up_while_storage_is_down(daemon, 2)
        # Storage returns in the middle of a run, after that run found no schema to read.
        seen = len(retriever.requests)
        retriever.delay_s = 0.5
        wait_for(lambda: len(retriever.requests) > seen, RUNS_S, "a run held up in flight")
    finally:
        proxy.start()
    retriever.delay_s = 0.0
    logged = _every_run_is_stored_in_order(daemon, postgres_url)
    assert logged[: len(buffered)] == buffered
    assert "storage unreachable; runs are buffered until it returns" in [
        e["event"] for e in daemon.events()
    ]
