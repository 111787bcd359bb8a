"""Fault injection end to end: `ragcanary serve` against a retriever that fails in every way it can.

Issue 5, item 1. The daemon watches ``FaultyRetriever`` failing at random for a while and must
survive it, count every failure under its outcome, log no traceback, keep its memory flat and
never turn a failure into a quality drop. Then the lifecycle faults test_daemon.py does not
already cover: a run longer than its interval, a reload through the API while a run is in
flight, and a restart with ``baseline: previous``. (test_daemon.py covers the storage outage
on PostgreSQL, SIGHUP and SIGTERM during a run and a restart with a pinned baseline.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, Scrape, config_yaml, free_port, running, wait_for
from faulty_retriever import EXPECTED_OUTCOME, MODES, FaultyRetriever, Mode

from ragcanary.config.target import TargetConfig
from ragcanary.measure.run_report import RunReport
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.store.storage import Store

TIMEOUT_S = 2.0  # generous: a correct answer late on a loaded machine would count as timeout
CAP_BYTES = 2_000_000  # max_response_bytes: the 50 MB body must stop being read here
WATCH_S = 25.0  # how long the daemon watches the retriever fail at random
DEADLINE_S = 60.0  # for anything that takes a few runs, with room for a loaded machine
ADMIN_TOKEN = "adm-faults-3c9a"  # reloading through the API needs it
LENIENT = {"suite": "lenient", "target": "flaky"}
MIN_COVERAGE = {"lenient": 0.2, "strict": 0.9}
# Every failure at random, and correct answers a third of the time. No random empty list: the
# contract counts an empty list as an answer (a genuine miss), so it would rightly lower hit
# rates; "empty" comes from a negative canary whose correct answer is empty.
CHAOS: dict[Mode, float] = {**dict.fromkeys(MODES, 1.0), "empty": 0.0, "ok": 5.0}
# What the daemon may warn about while the retriever misbehaves: one line per affected run,
# and a skipped tick when a run outlasts its interval (its own line and APScheduler's).
EXPECTED_WARNINGS = ("queries failed", "previous run still going", "Execution of job")
MiB = 1024 * 1024


def _corpus(queries: list[str]) -> dict[str, list[tuple[str, float]]]:
    """Each query's relevant document first, then four others."""
    return {
        q: [(f"rel-{q}", 0.9)] + [(f"doc-{q}-{j}", round(0.8 - j * 0.1, 2)) for j in range(4)]
        for q in queries
    }


def _suite_file(path: Path, queries: list[str], negative: str | None = None) -> None:
    cases: list[dict[str, Any]] = [
        {"id": q.replace(" ", "-"), "query": q, "relevant": [f"rel-{q}"]} for q in queries
    ]
    if negative is not None:
        cases.append({"id": "negative", "query": negative, "relevant": [], "max_score": 0.5})
    path.write_text(json.dumps({"cases": cases}), encoding="utf-8")


def _write_config(path: Path, port: int, storage: str, targets: Any, suites: Any) -> None:
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": targets,
        "suites": suites,
    }
    path.write_text(config_yaml(config), encoding="utf-8")  # suites share their target lists


def _memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _stored_reports(storage: str) -> list[RunReport]:
    """Every run report in ``storage``, read after the daemon stopped."""
    with Store.from_url(storage) as store:
        summaries = store.list_runs(limit=100_000)
        reports = [store.get_report(s["run_id"]) for s in summaries]
    return [r for r in reports if r is not None]


@pytest.mark.parametrize("mode", MODES)
def test_each_fault_over_real_http_gives_its_outcome(mode: Mode) -> None:
    """Every failure mode, one request over a socket, ends as its outcome within the timeout."""
    retriever = FaultyRetriever({"q": [("a", 0.9), ("b", 0.5)]}, timeout_s=0.5)

    async def ask() -> Any:
        config = TargetConfig(**retriever.target_entry(retries=0, max_response_bytes=CAP_BYTES))
        async with make_client(config) as client:
            return await HttpTarget("flaky", config, client).search("q", 5)

    with retriever:
        retriever.per_query["q"] = mode
        tracemalloc.start()
        try:
            answer = asyncio.run(ask())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert answer.outcome == EXPECTED_OUTCOME[mode], answer
    assert answer.latency_s < 10 * retriever.timeout_s
    # Nothing a retriever sends is held beyond the cap, compressed or not.
    assert peak < 4 * CAP_BYTES, f"{peak / MiB:.0f} MiB allocated at the peak"
    if mode in ("huge", "gzip_bomb"):
        assert answer.error == f"response larger than {CAP_BYTES} bytes"


@pytest.mark.parametrize(
    ("encoding", "outcome"), [("gzip", "ok"), ("deflate", "ok"), ("br", "bad_response")]
)
def test_compressed_answers_are_decoded_within_the_cap(encoding: str, outcome: str) -> None:
    """gzip and deflate answers read as plain ones; an encoding nobody asked for is refused."""
    retriever = FaultyRetriever({"q": [("a", 0.9), ("b", 0.5)]}, timeout_s=5, encoding=encoding)

    async def ask() -> Any:
        config = TargetConfig(**retriever.target_entry(retries=0, max_response_bytes=CAP_BYTES))
        async with make_client(config) as client:
            return await HttpTarget("zipped", config, client).search("q", 5)

    with retriever:
        answer = asyncio.run(ask())
    assert answer.outcome == outcome, answer
    if outcome == "ok":
        assert (answer.ids, answer.scores) == (("a", "b"), (0.9, 0.5))
    else:
        assert answer.error == "unsupported Content-Encoding 'br'"


class Watch:
    """What a test sees of the daemon over time, from scrapes no closer than ``every_s`` apart."""

    def __init__(self, daemon: DaemonProcess, every_s: float = 0.5) -> None:
        self.daemon = daemon
        self.every_s = every_s
        self.hit_rates: list[float] = []
        self.regressions: list[float] = []
        self._last = 0.0

    def look(self) -> Scrape | None:
        """Scrape and note the lenient suite's quality, unless the last scrape is too recent."""
        if time.monotonic() - self._last < self.every_s:
            return None
        self._last = time.monotonic()
        scrape = self.daemon.scrape()
        self.hit_rates += [
            s.value
            for s in scrape.samples
            if s.name == "ragcanary_hit_rate" and s.labels["suite"] == "lenient"
        ]
        regression = scrape.value("ragcanary_regression", **LENIENT)
        if regression is not None:
            self.regressions.append(regression)
        return scrape


@pytest.fixture
def chaos(tmp_path: Path) -> Iterator[tuple[DaemonProcess, FaultyRetriever, str]]:
    """A running daemon on a 1-second schedule against a randomly failing retriever.

    No retries, so every query is one request and what was stored can be matched, query by
    query, with what the retriever served.
    """
    lenient = [f"lenient question {i}" for i in range(10)]
    strict = [f"strict question {i}" for i in range(6)]
    negative = "a question nothing answers"
    _suite_file(tmp_path / "lenient.yaml", lenient, negative)
    _suite_file(tmp_path / "strict.yaml", strict)
    storage = f"sqlite:///{tmp_path / 'ragcanary.db'}"
    port = free_port()
    with FaultyRetriever(_corpus(lenient + strict), TIMEOUT_S, CHAOS, seed=5) as retriever:
        flaky = retriever.target_entry(
            timeout=f"{TIMEOUT_S:g}s", retries=0, concurrency=4, max_response_bytes=CAP_BYTES
        )
        common = {"targets": ["flaky"], "every": "1s", "k": [1, 5], "depth": 5}
        suites = {
            # Judged on whatever a third of the queries answer: quality must stay perfect.
            "lenient": {**common, "cases": "lenient.yaml", "min_coverage": MIN_COVERAGE["lenient"]},
            "strict": {**common, "cases": "strict.yaml", "min_coverage": MIN_COVERAGE["strict"]},
        }
        _write_config(tmp_path / "ragcanary.yaml", port, storage, {"flaky": flaky}, suites)
        daemon = DaemonProcess(tmp_path / "ragcanary.yaml", port, {})
        with running(daemon):
            yield daemon, retriever, storage


def test_daemon_survives_random_faults_counts_them_and_reports_no_quality_drop(
    chaos: tuple[DaemonProcess, FaultyRetriever, str],
) -> None:
    daemon, retriever, storage = chaos
    daemon.wait_runs("lenient", "flaky", 2, DEADLINE_S)  # warmed up: imports done, DB open
    warm = _memory(daemon.process.pid)
    watch = Watch(daemon)
    started = time.monotonic()
    outcomes = set(EXPECTED_OUTCOME.values())

    def watched_long_enough() -> bool:
        assert daemon.process.poll() is None, daemon.log
        scrape = watch.look()
        if scrape is None or time.monotonic() - started < WATCH_S:
            return False
        counted = {
            o: scrape.total("ragcanary_queries_total", **LENIENT, outcome=o) for o in outcomes
        }
        return all(counted.values())

    wait_for(watched_long_enough, WATCH_S + DEADLINE_S, "every outcome counted for lenient")
    end = _memory(daemon.process.pid)
    last = daemon.scrape()
    served_by_then = retriever.expected_outcomes()
    code, _ = daemon.stop()  # while runs are in flight: they finish and are stored
    assert code == 0, daemon.log

    # Each failure is counted under its outcome: no more than were served with that fault.
    for outcome in outcomes:
        counted = last.total("ragcanary_queries_total", target="flaky", outcome=outcome)
        served = sum(n for (_, o), n in served_by_then.items() if o == outcome)
        assert 0 < counted <= served, outcome
    stored = _stored_reports(storage)
    in_storage = Counter((c.query, c.outcome) for r in stored for c in r.cases)
    assert in_storage == retriever.expected_outcomes()  # every request, once, as what it was

    # Never a quality drop: the answered queries were all correct, whatever the coverage.
    assert watch.hit_rates, "lenient never had an answered run"
    assert set(watch.hit_rates) == {1.0}
    assert watch.regressions
    assert set(watch.regressions) == {0.0}
    runs = [e for e in daemon.events() if e["event"] == "run"]
    lenient = [r for r in runs if r["suite"] == "lenient"]
    assert any(r["outcome"] == "ok" and r["coverage"] < 0.6 for r in lenient), lenient
    for run in runs:  # unavailable exactly when too few queries were answered
        below = run["coverage"] < MIN_COVERAGE[run["suite"]]
        assert (run["outcome"] == "unavailable") == below, run
    assert any(r["outcome"] == "unavailable" for r in runs if r["suite"] == "strict")
    assert {r["run_id"] for r in runs} == {r.run_id for r in stored}

    # Logs: JSON, no traceback, and a failing retriever logged once per run, not per query.
    assert "Traceback" not in daemon.log
    events = daemon.events()
    assert not [e for e in events if {"exception", "exc_info"} & set(e)]
    assert not [e for e in events if e["level"] in ("error", "critical")]
    warnings = [e["event"] for e in events if e["level"] == "warning"]
    assert all(w.startswith(EXPECTED_WARNINGS) for w in warnings), Counter(warnings)
    for suite in MIN_COVERAGE:
        failed = [e for e in events if e["event"] == "queries failed" and e["suite"] == suite]
        assert len(failed) == sum(r["suite"] == suite and r["coverage"] < 1 for r in runs)
    # Nothing is logged per query: no line comes up more often than runs and skipped ticks.
    skipped = last.total("ragcanary_runs_skipped_total")
    lines = Counter(e["event"].split(" (trigger")[0] for e in events)
    assert max(lines.values()) <= len(runs) + skipped + 2, lines
    assert "run cancelled" not in {e["event"] for e in events}

    # Memory stays flat, and no 50 MB body was ever held: even the peak stays well below it.
    assert retriever.served_modes()["huge"] > 0
    assert retriever.served_modes()["gzip_bomb"] > 0
    assert end["VmRSS"] - warm["VmRSS"] < 20 * MiB, (warm, end)
    assert end["VmHWM"] - warm["VmRSS"] < 40 * MiB, (warm, end)


SLOW_QUERIES = [f"slow question {i}" for i in range(4)]
QUICK_QUERY = "quick question"
LONG = {"suite": "long", "target": "slow"}
LONG_SUITE = {
    "cases": "long.yaml",
    "targets": ["slow"],
    "every": "1s",
    "k": [1],
    "depth": 5,
    "baseline": "previous",
}


@dataclass
class SlowWorld:
    """A retriever that answers one query at a time in 0.4 s: a run of 1.6 s every second."""

    directory: Path
    retriever: FaultyRetriever
    port: int
    storage: str
    daemons: list[DaemonProcess] = field(default_factory=list)

    @property
    def daemon(self) -> DaemonProcess:
        return self.daemons[-1]

    def write_config(self, suites: dict[str, Any]) -> None:
        slow = self.retriever.target_entry(timeout="5s", retries=0, concurrency=1)
        config = self.directory / "ragcanary.yaml"
        _write_config(config, self.port, self.storage, {"slow": slow}, suites)

    def start(self) -> DaemonProcess:
        env = {"RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN}
        self.daemons.append(DaemonProcess(self.directory / "ragcanary.yaml", self.port, env))
        return self.daemon.start()

    def stored(self) -> list[dict[str, Any]]:
        """The stored runs of the long suite, oldest first."""
        runs = self.daemon.get("/api/v1/runs", suite="long", limit=1000).json()["runs"]
        return sorted(runs, key=lambda r: r["started_at"])


@pytest.fixture(scope="module")
def slow_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlowWorld]:
    directory = tmp_path_factory.mktemp("slow")
    _suite_file(directory / "long.yaml", SLOW_QUERIES)
    _suite_file(directory / "quick.yaml", [QUICK_QUERY])
    storage = f"sqlite:///{directory / 'ragcanary.db'}"
    corpus = _corpus([*SLOW_QUERIES, QUICK_QUERY])
    with FaultyRetriever(corpus, timeout_s=5.0, delay_s=0.4) as retriever:
        world = SlowWorld(directory, retriever, free_port(), storage)
        world.write_config({"long": LONG_SUITE})
        try:
            world.start()
            yield world
        finally:
            for daemon in world.daemons:
                if daemon.started and daemon.process.poll() is None:
                    daemon.stop()
                daemon.kill()


def test_run_longer_than_its_interval_skips_ticks_and_never_overlaps(
    slow_world: SlowWorld,
) -> None:
    scrape = slow_world.daemon.wait_runs("long", "slow", 3, DEADLINE_S)
    assert scrape.number("ragcanary_runs_skipped_total", **LONG) >= 1
    runs = slow_world.stored()
    assert len(runs) >= 3
    for before, after in itertools.pairwise(runs):
        ended = datetime.fromisoformat(before["started_at"]) + timedelta(
            seconds=before["duration_s"]
        )
        assert ended <= datetime.fromisoformat(after["started_at"]) + timedelta(seconds=0.05)
    # One query at a time, in suite order, run after run: a second run would interleave.
    asked = [s.query for s in slow_world.retriever.served]
    assert asked == [SLOW_QUERIES[i % 4] for i in range(len(asked))]
    skipped = [e for e in slow_world.daemon.events() if e["event"].startswith("previous run")]
    assert skipped
    assert {(e["suite"], e["target"]) for e in skipped} == {("long", "slow")}


def test_reload_through_the_api_during_a_run_stores_that_run_and_switches_config(
    slow_world: SlowWorld,
) -> None:
    daemon, retriever = slow_world.daemon, slow_world.retriever
    retriever.delay_s = 1.0  # a run of 4 s, so that the new suite starts while it goes on
    try:
        seen = len(retriever.served)
        wait_for(
            lambda: SLOW_QUERIES[0] in [s.query for s in retriever.served[seen:]],
            DEADLINE_S,
            "a long run to start",
        )
        slow_world.write_config(
            {"long": {**LONG_SUITE, "k": [1, 3]}, "quick": {**LONG_SUITE, "cases": "quick.yaml"}}
        )
        reloaded_at = datetime.now(UTC)
        response = daemon.post("/-/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert response.status_code == 200, response.text
        # The answer says what changed (issue 11 item 9): the long suite's k, a quick suite.
        assert response.json()["reloaded"] is True
        assert response.json()["changes"]["jobs"] == {
            "added": ["quick/slow"],
            "removed": [],
            "changed": ["long/slow"],
            "unchanged": [],
        }

        def in_flight_run_stored() -> dict[str, Any] | None:
            for run in slow_world.stored():
                started = datetime.fromisoformat(run["started_at"])
                if started < reloaded_at < started + timedelta(seconds=run["duration_s"]):
                    return run
            return None

        held = wait_for(in_flight_run_stored, DEADLINE_S, "the run in flight to be stored")
        daemon.wait_runs("quick", "slow", 1, DEADLINE_S)
    finally:
        retriever.delay_s = 0.4
    assert held is not None
    assert (held["outcome"], held["coverage"]) == ("ok", 1.0), held
    scrape = daemon.wait_runs("long", "slow", 1, DEADLINE_S)
    assert scrape.label_values("ragcanary_hit_rate", "k") == {"1", "3"}
    # The target's concurrency (1) holds across the reload, for the old run and the new suite.
    assert QUICK_QUERY in [s.query for s in retriever.served]
    assert retriever.most_in_flight == 1
    assert daemon.process.poll() is None
    events = daemon.events()
    assert not [e for e in events if e["level"] in ("error", "critical")]
    assert "run cancelled" not in {e["event"] for e in events}


def test_restart_resumes_with_the_last_run_as_baseline(slow_world: SlowWorld) -> None:
    code, _ = slow_world.daemon.stop()  # in the middle of a run, most likely: it is finished
    assert code == 0
    with Store.from_url(slow_world.storage) as store:
        last = store.latest_run("long", "slow")
    assert last is not None
    restarted = slow_world.start()

    def first_run() -> dict[str, Any] | None:
        runs = [e for e in restarted.events() if e["event"] == "run" and e["suite"] == "long"]
        return runs[0] if runs else None  # logged once stored

    first = wait_for(first_run, DEADLINE_S, "the first run after the restart")
    assert first is not None
    report = restarted.get(f"/api/v1/runs/{first['run_id']}").json()
    assert report["baseline"]["run_id"] == last["run_id"]
    assert report["baseline"]["rank_overlap"] == 1.0
