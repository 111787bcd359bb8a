"""`ragcanary serve` against targets that answer what it cannot use (issue 34 items 7 and 9).

One daemon, two pairs, each on a one-second schedule: ``misread`` points ``results`` at a key
the retriever's answers do not have (a config mistake, the target is up), and ``nested`` has
its queries embedded by an endpoint answering JSON nested deeper than the decoder follows.
Neither may crash a run or page as a target outage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from retrievers import EmbeddingServer, FakeRetriever, graded_corpus, target_entry

API_KEY = "sk-unread-51e0"
QUERIES = [f"question {i:02d}" for i in range(6)]
RUNS_S = 30.0  # a couple of one-second runs, with room for a loaded machine
MISREAD = {"suite": "core", "target": "misread"}
NESTED = {"suite": "core", "target": "nested"}


@dataclass
class World:
    daemon: DaemonProcess
    retriever: FakeRetriever
    config: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("unread")
    cases = [{"id": f"c{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    nested_json = b"[" * 100_000 + b"]" * 100_000
    with (
        FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever,
        EmbeddingServer(raw=nested_json) as embedder,
    ):
        nested = target_entry(retriever.url, retries=0, embedding="toy")
        nested["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
        port = free_port()
        config = {
            "storage": f"sqlite:///{directory / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{port}",
            "embeddings": {"toy": {"url": embedder.url, "model": "toy-1", "retries": 0}},
            "targets": {
                "misread": target_entry(retriever.url, retries=0, results="hit"),
                "nested": nested,
            },
            "suites": {
                "core": {"cases": "core.yaml", "targets": ["misread", "nested"], "every": "1s"}
            },
        }
        path = directory / "ragcanary.yaml"
        path.write_text(config_yaml(config), encoding="utf-8")
        with running(DaemonProcess(path, port, {"VENDOR_KEY": API_KEY})) as daemon:
            yield World(daemon, retriever, path)


def _reports(daemon: DaemonProcess, target: str) -> list[dict[str, Any]]:
    runs = daemon.get("/api/v1/runs", suite="core", target=target, limit=100).json()["runs"]
    return [daemon.get(f"/api/v1/runs/{r['run_id']}").json() for r in runs]


def test_json_nested_too_deep_from_the_embedder_is_counted_as_embedding_errors(
    world: World,
) -> None:
    """Item 9: the runs are unavailable, stored and counted; none fails unexpectedly."""
    scrape = world.daemon.wait_runs("core", "nested", 2, RUNS_S, outcome="unavailable")
    runs = scrape.total("ragcanary_runs_total", **NESTED)
    assert scrape.total("ragcanary_runs_total", **NESTED, outcome="unavailable") == runs
    counted = scrape.total("ragcanary_queries_total", **NESTED, outcome="embedding_error")
    assert counted == runs * len(QUERIES)
    assert scrape.number("ragcanary_coverage_ratio", **NESTED) == 0.0
    stored = _reports(world.daemon, "nested")
    assert stored
    assert all(r["counts"]["outcomes"]["embedding_error"] == 6 for r in stored)
    assert "nested deeper than the JSON decoder follows" in stored[0]["cases"][0]["error"]
    events = world.daemon.events()
    assert not [e for e in events if e["event"] == "run failed unexpectedly"]
    assert not [e for e in events if e["level"] in ("error", "critical")]


def test_paths_that_fit_no_answer_are_a_config_error_not_a_target_outage(world: World) -> None:
    """Item 7: stored unavailable with the config as the one reason, logged once per run,
    exported as the cause config, never as an outage."""
    scrape = world.daemon.wait_runs("core", "misread", 2, RUNS_S, outcome="unavailable")
    assert scrape.number("ragcanary_diagnosis", **MISREAD, cause="config") == 1
    assert scrape.number("ragcanary_diagnosis", **MISREAD, cause="outage") == 0
    assert scrape.number("ragcanary_diagnosis", **NESTED, cause="outage") == 1
    assert scrape.number("ragcanary_diagnosis", **NESTED, cause="config") == 0
    says = (
        "targets.misread.results: 'hit' matched nothing in the 6 answers that came back "
        "(HTTP 2xx); they hold the keys data"
    )
    stored = _reports(world.daemon, "misread")
    assert stored
    for report in stored:
        assert report["outcome"] == "unavailable"
        assert [f["kind"] for f in report["failures"]] == ["config"]
        assert report["failures"][0]["message"].startswith(says)

    def run_lines() -> list[dict[str, Any]]:
        lines = [e for e in world.daemon.events() if e["event"] == "run"]
        return [e for e in lines if e["target"] == "misread" and e["run_id"] in ids]

    ids = {r["run_id"] for r in stored}
    lines = wait_for(
        lambda: run_lines() if len(run_lines()) == len(ids) else None, RUNS_S, "a run line each"
    )
    for line in lines:
        assert line["level"] == "warning"
        assert line["outcome"] == "unavailable"
        assert line["reasons"][0].startswith(says)


def test_the_run_page_says_the_config_is_wrong(world: World) -> None:
    (report, *_) = _reports(world.daemon, "misread")
    page = world.daemon.get(f"/ui/runs/{report['run_id']}")
    assert page.status_code == 200
    assert "matched nothing in the 6 answers that came back" in page.text
