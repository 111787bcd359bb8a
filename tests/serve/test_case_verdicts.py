"""A canary's verdict, run by run, on its case page and in the API's history, over a real
daemon, SQLite and retriever: regressed, leaked and unanswered are never shown as ``ok``, and
an id is said to have left the top-k only when it was in it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from retrievers import FakeRetriever, target_entry

from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-verdicts-41c0"
DEPTH = 5
# "deep" ranks its relevant id 6th: never in the top 5 of any run.
DEEP = [(f"other-{i}", 0.9 - i / 10) for i in range(DEPTH)] + [("rel-deep", 0.3)]
CORPUS = {
    "moved question": [("rel-moved", 0.9), ("x", 0.5)],
    "deep question": DEEP,
    "streaming ingest": [("doc-x", 0.3)],  # a negative canary: max_score 0.6
}
SUITE = {
    "cases": [
        {"id": "moved", "query": "moved question", "relevant": ["rel-moved"]},
        {"id": "deep", "query": "deep question", "relevant": ["rel-deep"]},
        {"id": "neg", "query": "streaming ingest", "relevant": [], "max_score": 0.6},
    ]
}
KEY = JobKey("core", "vendor")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=dict(CORPUS), api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
async def daemon(tmp_path: Path, retriever: FakeRetriever) -> AsyncIterator[Daemon]:
    """A daemon, never started, whose pair has run four times: the baseline; rel-moved
    deleted; then the negative canary leaking too; then the target down."""
    (tmp_path / "core.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{tmp_path / 'verdicts.db'}",
        "targets": {"vendor": target_entry(retriever.url, retries=0)},
        "suites": {
            "core": {"cases": "core.yaml", "targets": ["vendor"], "k": [1, 3], "depth": DEPTH}
        },
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    loaded = load_config(path, environ)
    daemon = Daemon(path, environ, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    assert (await daemon.run_now(KEY)).outcome == "ok"  # pinned as the baseline
    retriever.drop_ids = {"rel-moved"}
    await daemon.run_now(KEY)
    retriever.corpus = {**CORPUS, "streaming ingest": [("doc-x", 0.7)]}
    assert (await daemon.run_now(KEY)).outcome == "regression"  # the leak fails the run
    retriever.status = 503
    assert (await daemon.run_now(KEY)).outcome == "unavailable"
    yield daemon
    await daemon.shutdown()


@pytest.fixture
async def ui(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(daemon.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


async def _case(ui: httpx.AsyncClient, case: str) -> str:
    response = await ui.get("/ui/case", params={"suite": "core", "case": case})
    assert response.status_code == 200, response.text
    return response.text


def _summary(page: str) -> str:
    found = re.search(r'<p class="summary">(.*?)</p>', page, re.S)
    assert found is not None, page
    return re.sub(r"<[^>]+>", "", found.group(1))


async def test_the_case_page_counts_verdicts_and_query_outcomes_apart(
    ui: httpx.AsyncClient,
) -> None:
    """The badge of a canary that lost its document says so, not "ok" for every answer."""
    summary = _summary(await _case(ui, "moved"))
    assert "regressed 2" in summary, summary
    assert "verdicts: regressed 2 ok 1 unanswered 1" in " ".join(summary.split())
    assert "query outcomes: ok 3 http_5xx 1" in " ".join(summary.split())
    leaked = " ".join(_summary(await _case(ui, "neg")).split())
    assert "verdicts: ok 2 leaked 1 unanswered 1" in leaked


async def test_the_recent_runs_list_the_verdict_beside_the_query_outcome(
    ui: httpx.AsyncClient,
) -> None:
    page = await _case(ui, "moved")
    head = re.search(r'aria-label="Recent runs of this case">.*?<thead>(.*?)</thead>', page, re.S)
    assert head is not None
    columns = re.findall(r'<th scope="col">(.*?)</th>', head.group(1))
    assert columns[2:4] == ["Verdict", "Query outcome"]
    cells = re.findall(r'<td data-verdict="(\w+)">.*?</td><td>(\w+)', page)
    assert cells == [  # newest first
        ("unanswered", "http_5xx"),
        ("regressed", "ok"),
        ("regressed", "ok"),
        ("ok", "ok"),
    ]


async def test_the_api_history_carries_each_runs_verdict(ui: httpx.AsyncClient) -> None:
    rows = {}
    for case in ("moved", "deep", "neg"):
        answer = await ui.get("/api/v1/history", params={"suite": "core", "case": case})
        assert answer.status_code == 200, answer.text
        rows[case] = [(r["verdict"], r["outcome"]) for r in answer.json()["history"]]
    down = ("unanswered", "http_5xx")
    assert rows == {
        "moved": [("ok", "ok"), ("regressed", "ok"), ("regressed", "ok"), down],
        "deep": [("ok", "ok"), ("ok", "ok"), ("ok", "ok"), down],
        "neg": [("ok", "ok"), ("ok", "ok"), ("leaked", "ok"), down],
    }


async def test_an_id_never_in_the_top_k_is_not_said_to_have_left_it(
    ui: httpx.AsyncClient,
) -> None:
    """rel-deep ranked 6th in every run: it never was in the top 5, so it did not leave it."""
    deep = await _case(ui, "deep")
    assert "<code>rel-deep</code> (left the top-5)" not in deep
    assert "No relevant id left the top-5 in this window." in deep
    assert (
        "Not in the newest answered top-5: <code>rel-deep</code> "
        "(not in the top-5 of any run shown)" in deep
    )
    moved = await _case(ui, "moved")
    assert "Not in the newest answered top-5: <code>rel-moved</code> (left the top-5)" in moved
