"""Stale labels on the pages, over a real daemon and SQLite: a retriever loses a document
(not returned by any canary), an index no longer holds one (left the index), and an id that
only left its own canary's top-k is told apart from both."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from retrievers import FakeRetriever, target_entry

from ragcanary.config.target import TargetConfig
from ragcanary.measure.run_report import StaleLabelEntry
from ragcanary.probe.target import make_client
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.serve.stale.index_checks import IndexChecks
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-stale-ui-5d"
WINDOW = 3  # stale_label_runs
CORPUS = {
    "q0": [("rel-0", 0.9), ("shared", 0.8), ("x0a", 0.5)],
    "q1": [("shared", 0.9), ("rel-1", 0.7), ("x1a", 0.4)],
    "q2": [("x2a", 0.9), ("rel-2", 0.8), ("x2b", 0.3)],
}
CORE = [
    {"id": "c0", "query": "q0", "relevant": ["rel-0"]},
    {"id": "c1", "query": "q1", "relevant": ["shared"]},
    {"id": "c2", "query": "q2", "relevant": ["rel-2"]},
]
KB = [
    {"id": "k1", "query": "first", "relevant": ["d1"]},
    {"id": "k2", "query": "second", "relevant": ["d2"]},
]
VENDOR, PC = JobKey("core", "vendor"), JobKey("kb", "pc")
NOT_RETURNED = f"not returned in the last {WINDOW} runs"
LOOKED_AT = datetime(2026, 11, 28, 9, 30, 5, tzinfo=UTC)  # the index's answers, wall clock
LOOKED_UP = "2026-11-28 09:30:05 UTC"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Pinecone:
    """A Pinecone index (over httpx.MockTransport) that returns d1 and holds ``held``."""

    def __init__(self) -> None:
        self.held = {"d1", "d2"}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/vectors/fetch":
            asked = request.url.params.get_list("ids")
            vectors = {i: {"id": i, "values": [0.1]} for i in asked if i in self.held}
            return httpx.Response(200, json={"vectors": vectors, "namespace": ""})
        hits = [{"_id": "d1", "_score": 0.9, "fields": {}}]
        return httpx.Response(200, json={"result": {"hits": hits}})


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=dict(CORPUS), api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
async def daemon(tmp_path: Path, retriever: FakeRetriever) -> AsyncIterator[Daemon]:
    (tmp_path / "core.yaml").write_text(json.dumps({"cases": CORE}), encoding="utf-8")
    (tmp_path / "kb.yaml").write_text(json.dumps({"cases": KB}), encoding="utf-8")
    suite = {"k": [1, 3], "depth": 5, "stale_label_runs": WINDOW}
    config = {
        "storage": f"sqlite:///{tmp_path / 'ui.db'}",
        "targets": {
            "vendor": target_entry(retriever.url, retries=0),
            "pc": {"preset": "pinecone", "url": "https://idx.pinecone.test"},
        },
        "suites": {
            "core": {"cases": "core.yaml", "targets": ["vendor"], **suite},
            "kb": {"cases": "kb.yaml", "targets": ["pc"], **suite},
        },
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    index = Pinecone()

    def clients(cfg: TargetConfig) -> httpx.AsyncClient:
        if cfg.preset == "pinecone":
            return httpx.AsyncClient(transport=httpx.MockTransport(index))
        return make_client(cfg)

    environ = {"VENDOR_KEY": API_KEY}
    clock = Clock()
    loaded = load_config(path, environ)
    daemon = Daemon(
        path,
        environ,
        loaded,
        client_factory=clients,
        index_checks=IndexChecks(clock=clock, wall_clock=lambda: LOOKED_AT),
    )
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    daemon.index, daemon.clock = index, clock  # type: ignore[attr-defined]
    yield daemon
    await daemon.shutdown()


@pytest.fixture
async def ui(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(daemon.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


async def _go_stale(daemon: Daemon, retriever: FakeRetriever) -> None:
    """Baselines; then rel-2 is deleted, ``shared`` leaves q1's list only (q0 still returns
    it), and the index behind pc loses d2."""
    for _ in range(WINDOW):
        assert (await daemon.run_now(VENDOR)).stale_labels in (None, ())
    assert (await daemon.run_now(PC)).stale_labels == ()
    retriever.drop_ids = {"rel-2"}
    retriever.corpus = {**CORPUS, "q1": [("rel-1", 0.7), ("x1a", 0.4)]}
    for _ in range(WINDOW):
        found = (await daemon.run_now(VENDOR)).stale_labels
    assert found == (StaleLabelEntry("c2", "rel-2", "not_returned"),)
    daemon.index.held.discard("d2")  # type: ignore[attr-defined]
    daemon.clock.now += 3600.0  # type: ignore[attr-defined]  # the hourly lookup is due
    found = (await daemon.run_now(PC)).stale_labels
    at = LOOKED_AT.isoformat()
    assert found == (StaleLabelEntry("k2", "d2", "missing", looked_up_at=at),)


def _page(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]
    return response.text


async def test_the_stale_labels_page_lists_each_pair_with_the_reason_in_words(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await _go_stale(daemon, retriever)
    text = _page(await ui.get("/ui/stale-labels"))
    rows = re.findall(
        r'<tr data-reason="(\w+)"><th scope="row"><a href="[^"]+">(\w+)</a></th>'
        r'<td data-label="Id"><code>([^<]+)</code></td>'
        r'<td data-label="Why"><span class="mark stale">([^<]+)</span>',
        text,
    )
    assert sorted(rows) == [
        ("missing", "k2", "d2", "left the index"),
        ("not_returned", "c2", "rel-2", NOT_RETURNED),
    ]
    assert "shared" not in text  # it only left its own canary's top-k: not stale
    assert '<td data-label="Looked up">' + LOOKED_UP + "</td>" in text  # d2's row
    assert f"Index looked up {LOOKED_UP} for every relevant id (2)." in text
    assert "The index could not tell which relevant ids it holds" in text  # the http target
    one = _page(await ui.get("/ui/stale-labels", params={"suite": "kb", "target": "pc"}))
    assert "d2" in one
    assert "rel-2" not in one


async def test_the_fleet_counts_stale_labels_per_pair_and_links_to_them(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    text = _page(await ui.get("/ui/"))
    assert "stale label" not in text  # no run yet: nothing to count
    await _go_stale(daemon, retriever)
    text = _page(await ui.get("/ui/"))
    links = re.findall(r'<a class="sub stale-link" href="([^"]+)">([^<]+)</a>', text)
    assert sorted(links) == [
        ("/ui/stale-labels?suite=core&amp;target=vendor", "1 stale label"),
        ("/ui/stale-labels?suite=kb&amp;target=pc", "1 stale label"),
    ]


async def test_the_diff_tells_a_stale_label_from_an_id_that_left_the_top_k(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await _go_stale(daemon, retriever)
    text = _page(await ui.get("/ui/diff", params={"suite": "core", "target": "vendor"}))
    articles = dict(
        re.findall(
            r'<article class="case-diff"[^>]*>\s*<h3><a href="[^"]+">(\w+)</a>(.*?)</article>',
            text,
            re.S,
        )
    )
    assert set(articles) == {"c1", "c2"}
    assert "relevant ids that left: <code>rel-2</code> (was #2; " + NOT_RETURNED in articles["c2"]
    # Not a stale label: it only left the top-5 (and the newer run's diagnosis says why).
    assert (
        "relevant ids that left: <code>shared</code> (was #1; left the top-5; why: "
        in (articles["c1"])
    )
    stale_slot = re.search(r'<li class="left rel">.*?</li>', articles["c2"], re.S)
    assert stale_slot is not None
    assert "rel-2" in stale_slot.group(0)
    assert f'<span class="mark stale">{NOT_RETURNED}</span>' in stale_slot.group(0)
    assert 'class="mark stale"' not in articles["c1"]
    assert "a stale label: the document is gone" in text  # the legend, since one is shown


async def test_the_case_page_marks_stale_relevant_ids_with_the_same_words(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await _go_stale(daemon, retriever)

    async def case(suite: str, case: str, target: str) -> str:
        params = {"suite": suite, "case": case, "target": target}
        return _page(await ui.get("/ui/case", params=params))

    gone = await case("core", "c2", "vendor")
    assert (
        '<code>rel-2</code>&nbsp;<span class="grade">(1)</span> '
        f'<span class="mark stale">{NOT_RETURNED}</span>' in gone
    )
    assert f"Not in the newest answered top-5: <code>rel-2</code> ({NOT_RETURNED})" in gone
    moved = await case("core", "c1", "vendor")
    assert "Not in the newest answered top-5: <code>shared</code> (left the top-5)" in moved
    assert 'class="mark stale"' not in moved
    deleted = await case("kb", "k2", "pc")
    assert (
        '<span class="mark stale">left the index</span> '
        f'<span class="sub">looked up {LOOKED_UP}</span>' in deleted
    )
    assert f"left the index</span> (index looked up {LOOKED_UP})" in deleted
    assert 'class="mark stale"' not in await case("kb", "k1", "pc")


async def test_a_pair_that_cannot_tell_yet_says_so(daemon: Daemon, ui: httpx.AsyncClient) -> None:
    before = _page(await ui.get("/ui/stale-labels"))
    assert before.count("No answered run yet.") == 2
    await daemon.run_now(VENDOR)  # one run: too few to tell, and http cannot look ids up
    text = _page(await ui.get("/ui/stale-labels", params={"suite": "core"}))
    assert f"had fewer than {WINDOW} runs" in text
    assert "0 stale labels over 1 suite \u00d7 target pair shown" in text
