"""Labels that left the index: asked of the target now and then, stale at once when gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.index_checks import IndexChecks
from ragcanary.suites.loaded import load_config

QUESTION = (("d1", "d2"), "config")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_pair_asks_again_after_its_runs_or_an_hour_whichever_comes_first() -> None:
    clock = Clock()
    checks = IndexChecks(every_s=3600.0, clock=clock)
    pair = ("core", "kb")
    assert checks.due(pair, QUESTION, runs=3)
    assert checks.last(pair) is None
    checks.remember(pair, QUESTION, {"d2"})
    assert [checks.due(pair, QUESTION, runs=3) for _ in range(3)] == [False, False, True]
    checks.remember(pair, QUESTION, None)  # the target could not tell this time
    assert checks.last(pair) is None
    clock.now += 3599.0
    assert not checks.due(pair, QUESTION, runs=50)
    clock.now += 1.0
    assert checks.due(pair, QUESTION, runs=50)


def test_other_labels_or_another_target_config_are_asked_at_once() -> None:
    checks = IndexChecks(clock=Clock())
    pair = ("core", "kb")
    checks.remember(pair, QUESTION, set())
    assert not checks.due(pair, QUESTION, runs=50)
    assert checks.due(pair, (("d1", "d2", "d3"), "config"), runs=50)
    assert checks.due(pair, (("d1", "d2"), "another config"), runs=50)


class Pinecone:
    """A Pinecone index that returns d1 for every canary and holds ``held``."""

    def __init__(self) -> None:
        self.held = {"d1", "d2"}
        self.fetches: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/vectors/fetch":
            asked = request.url.params.get_list("ids")
            self.fetches.append(asked)
            vectors = {i: {"id": i, "values": [0.1]} for i in asked if i in self.held}
            return httpx.Response(200, json={"vectors": vectors, "namespace": ""})
        hits = [{"_id": "d1", "_score": 0.9, "fields": {}}]
        return httpx.Response(200, json={"result": {"hits": hits}})


@pytest.mark.anyio
async def test_a_document_the_index_lost_is_a_stale_label_at_its_next_lookup(
    tmp_path: Path,
) -> None:
    cases = [
        {"id": "c1", "query": "first", "relevant": ["d1"]},
        {"id": "c2", "query": "second", "relevant": ["d2"]},
    ]
    (tmp_path / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "targets": {"pc": {"preset": "pinecone", "url": "https://idx.pinecone.test"}},
        "suites": {"core": {"cases": "core.yaml", "targets": ["pc"], "stale_label_runs": 50}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    index = Pinecone()
    clock = Clock()
    daemon = Daemon(
        path,
        {},
        load_config(path, {}),
        client_factory=lambda _: httpx.AsyncClient(transport=httpx.MockTransport(index)),
        index_checks=IndexChecks(clock=clock),
    )
    daemon.exporter.load(suite_pairs(daemon.loaded))  # as startup does
    key = JobKey("core", "pc")
    gauge = {"suite": "core", "target": "pc"}

    def stale(report: dict[str, Any]) -> Any:
        return report["stale_labels"]

    try:
        # Too few runs to tell what no canary gets back, but the index holds every label.
        assert stale(await daemon.run_now(key)) == []
        assert index.fetches == [["d1", "d2"]]
        index.held.discard("d2")  # a data migration deleted it
        assert stale(await daemon.run_now(key)) == []  # not asked again within the hour
        assert len(index.fetches) == 1
        clock.now += 3600.0
        assert stale(await daemon.run_now(key)) == [{"case": "c2", "id": "d2", "reason": "missing"}]
        assert len(index.fetches) == 2
        assert daemon.exporter.registry.get_sample_value("ragcanary_stale_labels", gauge) == 1.0
    finally:
        await daemon.keeper.close()
