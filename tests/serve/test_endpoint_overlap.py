"""The daemon asks a target's endpoints too, and exports ``ragcanary_endpoint_overlap``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from retrievers import CORPUS, FakeRetriever, target_entry

from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-vendor-0c44e1"
SEARCH = JobKey("core", "search")
SUITE = {
    "cases": [
        {"id": "password", "query": "reset password", "relevant": ["doc-7"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"]},
    ]
}
CONFIG = """\
storage: sqlite:///{db}
targets: {{search: {target}}}
suites:
  core: {{cases: core.yaml, targets: [search], k: [1, 3], depth: 5}}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def replicas() -> Iterator[tuple[FakeRetriever, FakeRetriever]]:
    with (
        FakeRetriever(api_key=API_KEY) as url,
        FakeRetriever(corpus=dict(CORPUS), api_key=API_KEY) as eu,
    ):
        yield url, eu


@pytest.fixture
async def daemon(
    tmp_path: Path, replicas: tuple[FakeRetriever, FakeRetriever]
) -> AsyncIterator[Daemon]:
    """A daemon never started: runs happen through ``run_now``."""
    url, eu = replicas
    (tmp_path / "core.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    target = json.dumps(target_entry(url.url, retries=0, endpoints={"eu": eu.url}))
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "ragcanary.db", target=target), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    loaded = load_config(path, environ)
    daemon = Daemon(path, environ, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    yield daemon
    await daemon.shutdown()


def _overlap(daemon: Daemon) -> float | None:
    labels = {"suite": "core", "target": "search", "endpoint": "eu"}
    return daemon.exporter.registry.get_sample_value("ragcanary_endpoint_overlap", labels)


async def test_the_gauge_shows_an_endpoint_that_diverges_while_the_url_is_fine(
    daemon: Daemon, replicas: tuple[FakeRetriever, FakeRetriever]
) -> None:
    _, eu = replicas
    assert _overlap(daemon) is None  # no run yet
    first = await daemon.run_now(SEARCH)
    assert _overlap(daemon) == 1.0
    eu.corpus = {**CORPUS, "pricing plans": [("doc-9", 0.7)]}  # eu lost doc-3 and doc-7
    second = await daemon.run_now(SEARCH)
    assert second.outcome == "ok"
    assert second.diagnosis is not None
    assert second.diagnosis.cause == "none"
    assert _overlap(daemon) == 0.0
    scraped = daemon.exporter.exposition().decode()  # what GET /metrics answers
    assert 'ragcanary_endpoint_overlap{endpoint="eu",suite="core",target="search"} 0.0' in scraped
    assert (first.outcome, len(eu.requests)) == ("ok", 4)  # each run asked eu each canary
