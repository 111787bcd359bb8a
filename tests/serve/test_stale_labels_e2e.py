"""Stale labels against a real daemon: the index loses a document a canary expects."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.measure.cases import Case
from ragcanary.measure.stale import StaleLabel, stale_labels

API_KEY = "sk-stale-3e1"
QUERIES = [f"question {i:02d}" for i in range(4)]
DEADLINE_S = 30.0


def test_only_relevant_ids_no_canary_got_back_are_stale() -> None:
    cases = [
        Case("a", "qa", {"d1": 1, "d2": 0}),  # d2 judged not relevant: never stale
        Case("b", "qb", {"d3": 2, "d4": 1}),
        Case("c", "qc", {}),  # a negative canary expects nothing
        Case("d", "qd"),  # label-free
    ]
    assert stale_labels(cases, {"d1", "d4"}) == [StaleLabel("b", "d3")]
    assert stale_labels(cases, {"d1", "d3", "d4"}) == []


def test_a_document_the_index_lost_becomes_a_stale_label_and_validate_live_names_it(
    tmp_path: Path,
) -> None:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        # A hard canary: its document never comes back. A miss, not a label that went stale.
        hard = {"id": "hard", "query": QUERIES[0], "relevant": ["never-returned"]}
        path, port = _configure(tmp_path, retriever.url, window=3, extra_cases=[hard])
        daemon = DaemonProcess(path, port, {"VENDOR_KEY": API_KEY})
        labels = {"suite": "core", "target": "vendor"}
        with running(daemon):
            wait_for(
                lambda: daemon.scrape().value("ragcanary_stale_labels", **labels) == 0,
                DEADLINE_S,
                "three answered runs and no stale label",
            )
            retriever.drop_ids = {"rel-2"}  # a data migration deleted it
            wait_for(
                lambda: daemon.scrape().value("ragcanary_stale_labels", **labels) == 1,
                DEADLINE_S,
                "the lost document counted as a stale label",
            )
        result = CliRunner().invoke(
            app, ["validate", "--live", "-c", str(path)], env={"VENDOR_KEY": API_KEY}
        )
    assert result.exit_code == 0, result.output
    assert "core on vendor: 1 stale labels" in result.output
    assert "case case-2: rel-2" in result.output


def test_runs_stored_before_a_restart_count_toward_the_window(tmp_path: Path) -> None:
    """A restarted daemon (or a replica) reads the window's earlier runs from storage: an id
    they returned is not stale at the first run after it stopped coming back."""
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        path, port = _configure(tmp_path, retriever.url, window=4)
        env = {"VENDOR_KEY": API_KEY}
        with running(DaemonProcess(path, port, env)) as first:
            first.wait_runs("core", "vendor", 3, DEADLINE_S, outcome="ok")
            before = {r["run_id"] for r in _runs(first)}
        retriever.drop_ids = {"rel-2"}  # no canary gets it back from now on
        with running(DaemonProcess(path, port, env)) as second:
            wait_for(
                lambda: second.scrape().value("ragcanary_stale_labels", suite="core") == 1,
                DEADLINE_S,
                "the document counted as a stale label once the window holds no run with it",
            )
            after = [r for r in _runs(second) if r["run_id"] not in before]
            reports = [second.get(f"/api/v1/runs/{r['run_id']}").json() for r in after]
    reports.sort(key=lambda r: str(r["started_at"]))
    assert reports[0]["stale_labels"] == []  # the runs before the restart returned rel-2
    stale = [r["stale_labels"] for r in reports if r["stale_labels"]]
    assert stale[0] == [{"case": "case-2", "id": "rel-2", "reason": "not_returned"}]
    assert len(reports) - len(stale) == 3  # the window of 4 held a run with rel-2 until then


def _runs(daemon: DaemonProcess) -> list[dict[str, Any]]:
    answer = daemon.get("/api/v1/runs", suite="core", limit=1000)
    found: list[dict[str, Any]] = answer.json()["runs"]
    return found


def _configure(
    tmp_path: Path, url: str, window: int, extra_cases: Sequence[dict[str, Any]] = ()
) -> tuple[Path, int]:
    """A config running suite core (one canary per query, ``rel-i`` relevant) every second on
    the retriever at ``url``, stale labels over ``window`` runs; its path and port."""
    cases = [
        {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (tmp_path / "core.yaml").write_text(
        json.dumps({"cases": [*cases, *extra_cases]}), encoding="utf-8"
    )
    port = free_port()
    suite = {"cases": "core.yaml", "targets": ["vendor"], "every": "1s", "stale_label_runs": window}
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(url, timeout="5s", retries=0)},
        "suites": {"core": suite},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, port
