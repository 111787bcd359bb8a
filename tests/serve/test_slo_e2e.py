"""A real `ragcanary serve` with an SLO against a retriever that degrades: the counters it
exports agree with the runs it stored, the API and `ragcanary slo` read the same budget."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from retrievers import FakeRetriever, target_entry

SUITE, TARGET = "core", "search"
PAIR = {"suite": SUITE, "target": TARGET}
QUERIES = [f"canary question {i}" for i in range(8)]
ENV = {"VENDOR_KEY": "k-123"}
KEEP = ("PATH", "PYTHONPATH", "HOME")  # of this process's environment, for the CLI


def _corpus() -> dict[str, list[tuple[str, float]]]:
    # Each canary's relevant document first, then fillers: Hit@5 is 1 until it is dropped.
    return {
        q: [(f"rel-{i}", 0.9), *[(f"doc-{i}-{j}", 0.5 - j / 100) for j in range(6)]]
        for i, q in enumerate(QUERIES)
    } | {"off topic": [("doc-x", 0.2)], "label free": [("doc-y", 0.3)]}


def _write(tmp_path: Path, url: str, port: int) -> Path:
    cases = [{"id": f"c{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)]
    cases += [
        {"id": "negative", "query": "off topic", "relevant": [], "max_score": 0.95},
        {"id": "free", "query": "label free"},
    ]
    (tmp_path / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "targets": {TARGET: target_entry(url, timeout="2s", retries=0)},
        "suites": {
            SUITE: {
                "cases": "core.yaml",
                "targets": [TARGET],
                "every": "1s",
                "k": [1, 5],
                "min_coverage": 0.5,
                "slo": {"objective": 0.9, "window": "30d", "good": "hit_rate@5"},
            }
        },
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return path


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[DaemonProcess, FakeRetriever, Path]]:
    with FakeRetriever(corpus=_corpus(), api_key=ENV["VENDOR_KEY"]) as retriever:
        port = free_port()
        config = _write(tmp_path, retriever.url, port)
        with running(DaemonProcess(config, port, ENV)) as daemon:
            yield daemon, retriever, config


def _expected(reports: list[dict[str, Any]]) -> tuple[int, int]:
    """Events and good events counted from the stored reports as docs/slo.md says: each
    answered, labelled canary of an answered run; good when its Hit@5 is 1."""
    events = good = 0
    for report in reports:
        if report["outcome"] not in ("ok", "regression"):
            continue
        for case in report["cases"]:
            if case["kind"] == "labelled" and case["outcome"] == "ok":
                events += 1
                good += case["metrics"]["hit_rate@5"] == 1.0
    return events, good


def _stored(daemon: DaemonProcess) -> list[dict[str, Any]]:
    runs = daemon.get("/api/v1/runs", suite=SUITE, target=TARGET, limit=1000).json()["runs"]
    return [daemon.get(f"/api/v1/runs/{run['run_id']}").json() for run in runs]


def test_counters_agree_with_the_stored_reports_through_a_slow_degradation_and_an_outage(
    stack: tuple[DaemonProcess, FakeRetriever, Path],
) -> None:
    daemon, retriever, config = stack
    first = daemon.scrape()
    # The series at 0 before any run is tests/serve/test_slo_counters.py's: here runs start
    # within the second, possibly before the first scrape.
    assert first.value("ragcanary_slo_events_total", **PAIR) is not None
    assert first.value("ragcanary_slo_good_total", **PAIR) is not None
    assert first.value("ragcanary_slo_objective", **PAIR) == 0.9
    daemon.wait_runs(SUITE, TARGET, 2, timeout=60)
    for lost in range(3):  # a slow slide: one more relevant document gone every other run
        retriever.drop_ids.add(f"rel-{lost}")
        daemon.wait_runs(SUITE, TARGET, 2, timeout=60)
    # An outage: unavailable runs, which count no event, so the counters stand still and
    # every answered run is stored by now.
    retriever.status = 503
    daemon.wait_runs(SUITE, TARGET, 2, timeout=60, outcome="unavailable")

    def settled() -> tuple[float, float, list[dict[str, Any]]] | None:
        before = daemon.scrape()
        reports = _stored(daemon)
        after = daemon.scrape()
        counted = [
            after.number(f"ragcanary_slo_{name}_total", **PAIR) for name in ("events", "good")
        ]
        if counted != [
            before.number(f"ragcanary_slo_{n}_total", **PAIR) for n in ("events", "good")
        ]:
            return None
        return counted[0], counted[1], reports

    found = wait_for(settled, 30, "SLO counters that stand still during the outage")
    assert found is not None
    events, good, reports = found
    assert (events, good) == _expected(reports)
    assert events > good > 0, "the slide shows as bad events"
    assert any(r["outcome"] == "unavailable" for r in reports)
    assert events % len(QUERIES) == 0, "negative and label-free canaries are no events"

    budget = daemon.get("/api/v1/slo").json()["slo"]
    assert [(b["suite"], b["target"], b["events"], b["good_events"]) for b in budget] == [
        (SUITE, TARGET, events, good)
    ]
    remaining = 1 - (1 - good / events) / (1 - 0.9)
    assert budget[0]["budget_remaining"] == pytest.approx(remaining)
    assert budget[0]["objective"] == 0.9

    def gauge() -> bool:
        shown = daemon.scrape().value("ragcanary_slo_budget_remaining", **PAIR)
        return shown is not None and shown == pytest.approx(remaining)

    wait_for(gauge, 30, "the budget gauge read from the stored runs")

    fleet = daemon.get("/ui/").text
    assert "Error budget left · burn 1 h" in fleet
    assert f"{remaining * 100:.1f}%" in fleet
    assert f"{good:.0f} of {events:.0f} good in 30 d" in fleet

    remote = _cli("slo", "--url", daemon.url, "--json")
    assert json.loads(remote) == budget
    table = _cli("slo", "--url", daemon.url)
    assert "core" in table
    assert f"{remaining * 100:.1f}%" in table

    with contextlib.suppress(subprocess.TimeoutExpired):
        daemon.stop(timeout=30)
    # Read from the database itself, the daemon stopped (the outage's runs add no event).
    local = json.loads(_cli("slo", "-c", str(config), "--json"))
    assert (local[0]["events"], local[0]["good_events"]) == (events, good)


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ragcanary", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**ENV, "COLUMNS": "200", **{k: v for k, v in os.environ.items() if k in KEEP}},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
