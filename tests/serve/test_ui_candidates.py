"""The candidates page over a real daemon and SQLite: failure reports posted to the API, listed
most reported first with what the demo retriever (and a slow and a broken one) answers now."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from retrievers import FakeRetriever, target_entry

from ragcanary.serve.daemon import Daemon, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.serve.http.ui import candidatespage
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

INGEST = "ingest-ui-41c7"
API_KEY = "sk-cand-ui-9e"
ADMIN = "admin-ui-c4n-7d"
JSON_QUERY = "parse a json string into a python dict"
SCRIPT_QUERY = "<script>window.owned = 1</script> sort a list in place"
EMAIL_QUERY = "ana.lopez@example.com cannot read a csv file"
PAGE_BYTES = 300_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def demo() -> Iterator[Any]:
    from ragcanary.demo.retriever import BackgroundServer

    with BackgroundServer(port=0) as server:
        yield server


@pytest.fixture
def slow() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus={"slow question": [("s-1", 0.9)]}, api_key=API_KEY) as fake:
        fake.delay_s = 3.0
        yield fake


@pytest.fixture
def broken() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus={}, api_key=API_KEY) as fake:
        fake.status = 503
        yield fake


@pytest.fixture
async def daemon(
    tmp_path: Path, demo: Any, slow: FakeRetriever, broken: FakeRetriever
) -> AsyncIterator[Daemon]:
    suite = {"cases": [{"id": "json", "query": JSON_QUERY, "relevant": ["json.loads"]}]}
    (tmp_path / "core.yaml").write_text(json.dumps(suite), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{tmp_path / 'ui.db'}",
        "targets": {
            "demo": {
                "url": demo.search_url,
                "body": {"q": "{query}", "limit": "{k}"},
                "results": "hits",
                "retries": 0,
            },
            "slow": target_entry(slow.url, timeout="1s", retries=0),
            "sluggish": target_entry(slow.url, timeout="30s", retries=0),
            "broken": target_entry(broken.url, retries=0),
        },
        "suites": {"core": {"cases": "core.yaml", "targets": ["demo"]}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    environ = {
        "VENDOR_KEY": API_KEY,
        "RAGCANARY_INGEST_TOKEN": INGEST,
        "RAGCANARY_ADMIN_TOKEN": ADMIN,
    }
    loaded = load_config(path, environ)
    daemon = Daemon(path, environ, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    yield daemon
    await daemon.shutdown()


@pytest.fixture
async def ui(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(daemon.service))
    # Signed in as a browser is after the page asked (a request's own header wins over it).
    signed_in = {"authorization": "Basic " + base64.b64encode(f"oncall:{ADMIN}".encode()).decode()}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", timeout=30, headers=signed_in
    ) as client:
        yield client


async def _report(ui: httpx.AsyncClient, daemon: Daemon, *reports: dict[str, Any]) -> None:
    """Post failure reports as the application does, then store them."""
    for body in reports:
        response = await ui.post(
            "/api/v1/candidates", json=body, headers={"Authorization": f"Bearer {INGEST}"}
        )
        assert response.status_code == 202, response.text
    await daemon.intake.flush()


def _page(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert len(response.content) <= PAGE_BYTES
    assert "script-src 'self'" in response.headers["content-security-policy"]
    return response.text


def _cards(text: str) -> dict[int, str]:
    """Each candidate's article on the page, by id, in page order."""
    found = re.findall(r'<article class="candidate" data-id="(\d+)">(.*?)</article>', text, re.S)
    return {int(i): body for i, body in found}


def _live_ids(card: str) -> list[str]:
    live = card[card.index('<div class="live"') :]
    return re.findall(r'<span class="n">\d+</span><code>([^<]*)</code>', live)


async def test_the_page_lists_the_most_reported_first_with_live_results_of_the_demo(
    daemon: Daemon, ui: httpx.AsyncClient, demo: Any
) -> None:
    await _report(
        ui,
        daemon,
        *[
            {"query": JSON_QUERY, "signal": s, "target": "demo",
             "ids": ["json.loads", "pickle.loads"], "source": "web-app", "note": "rephrased"}
            for s in ("thumbs_down", "rephrased", "thumbs_down")
        ],
        {"query": EMAIL_QUERY, "signal": "abandoned", "target": "demo", "source": "mobile"},
        {"query": EMAIL_QUERY.upper(), "signal": "abandoned", "target": "demo"},
        {"query": "how do I zip two lists", "signal": "other", "target": "demo"},
    )  # fmt: skip
    text = _page(await ui.get("/ui/candidates"))
    cards = list(_cards(text).values())
    assert len(cards) == 3
    assert JSON_QUERY in cards[0]  # three reports, then two, then one
    assert "&lt;email&gt; cannot read a csv file" in cards[1]  # redacted as stored
    assert "example.com" not in text
    assert "thumbs_down 2" in cards[0]
    assert "rephrased 1" in cards[0]
    assert "<code>json.loads</code>, <code>pickle.loads</code>" in cards[0]  # the app's ids
    assert "<code>web-app</code>" in cards[0]
    async with httpx.AsyncClient(timeout=10) as client:
        asked = await client.post(demo.search_url, json={"q": JSON_QUERY, "limit": 10})
    direct = asked.json()
    expected = [hit["id"] for hit in direct["hits"]]
    assert expected, "the demo retriever finds something for the query"
    assert _live_ids(cards[0]) == expected
    seen = re.findall(r'<li class="seen">.*?<code>([^<]*)</code>.*?</li>', cards[0])
    assert seen == ["json.loads"]  # the one of the application's ids the target returns now
    assert f"{direct['hits'][0]['score']:.3f}" in cards[0]
    assert "ragcanary candidates promote" in text
    assert "--suite core" in text


async def test_a_slow_and_a_broken_target_are_shown_as_such_on_their_candidates(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    await _report(
        ui,
        daemon,
        {"query": "slow question", "signal": "thumbs_down", "target": "slow"},
        {"query": "slow question", "signal": "thumbs_down", "target": "slow"},
        {"query": "broken question", "signal": "thumbs_down", "target": "broken"},
        {"query": JSON_QUERY, "signal": "other", "target": "demo"},
    )
    started = time.monotonic()
    text = _page(await ui.get("/ui/candidates"))
    assert time.monotonic() - started < candidatespage.LIVE_DEADLINE_S + 2
    cards = list(_cards(text).values())
    slow_card = next(c for c in cards if "slow question" in c)
    broken_card = next(c for c in cards if "broken question" in c)
    demo_card = next(c for c in cards if JSON_QUERY in c)
    assert 'data-live="timeout"' in slow_card
    assert "slow was too slow" in slow_card
    assert 'data-live="http_5xx"' in broken_card
    assert "broken failed" in broken_card
    assert 'data-live="ok"' in demo_card
    assert _live_ids(demo_card)


async def test_the_page_stops_waiting_at_its_deadline(
    daemon: Daemon, ui: httpx.AsyncClient, slow: FakeRetriever
) -> None:
    """A target slower than the page's deadline (but within its own timeout) is shown late."""
    await _report(ui, daemon, {"query": "slow question", "signal": "other", "target": "sluggish"})
    listed = await asyncio.to_thread(candidatespage.listing, daemon.service, None, 1)
    started = time.monotonic()
    (shown,) = await candidatespage.with_live(daemon.service, listed["rows"], deadline_s=0.3)
    assert time.monotonic() - started < 2.0
    assert shown.live is not None
    assert (shown.live.outcome, shown.live.hits) == (candidatespage.LATE, [])
    assert "0.3 s" in str(shown.live.error)


async def test_a_script_tag_in_a_reported_query_is_text(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    await _report(
        ui,
        daemon,
        {"query": SCRIPT_QUERY, "signal": "thumbs_down", "target": "demo",
         "ids": ['<img src=x onerror="alert(1)">'], "note": "<b>bold</b>", "source": "<i>s</i>"},
    )  # fmt: skip
    listed = _page(await ui.get("/ui/candidates"))
    (candidate_id,) = _cards(listed)
    one = _page(await ui.get(f"/ui/candidates/{candidate_id}"))
    for text in (listed, one):
        assert "&lt;script&gt;window.owned = 1&lt;/script&gt; sort a list in place" in text
        assert "<script>window" not in text
        assert "<img src=x" not in text
        assert "&lt;i&gt;s&lt;/i&gt;" in text
        for tag in re.findall(r"<script[^>]*>", text):
            assert re.fullmatch(r'<script src="/ui/static/[^"]+" defer>', tag), tag
    assert "&lt;b&gt;bold&lt;/b&gt;" in one  # the note, on the candidate's own page


@pytest.mark.parametrize(
    ("signal", "expected"),
    [("", ["zip", "json"]), ("rephrased", ["json"]), ("abandoned", [])],
)
async def test_the_signal_filter_works_without_javascript(
    daemon: Daemon, ui: httpx.AsyncClient, signal: str, expected: list[str]
) -> None:
    await _report(
        ui,
        daemon,
        {"query": "how do I zip two lists", "signal": "thumbs_down", "target": "demo"},
        {"query": "how do I zip two lists", "signal": "other", "target": "demo"},
        {"query": JSON_QUERY, "signal": "rephrased", "target": "demo"},
    )
    text = _page(await ui.get("/ui/candidates", params={"signal": signal}))
    shown = ["zip" if "zip two lists" in c else "json" for c in _cards(text).values()]
    assert shown == expected
    assert '<form class="filters" method="get" action="/ui/candidates">' in text
    if signal:
        assert f'<option value="{signal}" selected>' in text


async def test_an_unknown_signal_or_candidate_is_an_error_page(ui: httpx.AsyncClient) -> None:
    unknown = await ui.get("/ui/candidates", params={"signal": "nope"})
    assert unknown.status_code == 400
    assert "thumbs_down" in unknown.text
    missing = await ui.get("/ui/candidates/4242")
    assert missing.status_code == 404
    assert "No candidate 4242" in missing.text


async def test_only_the_first_candidates_of_a_page_ask_their_target(
    daemon: Daemon, ui: httpx.AsyncClient, demo: Any
) -> None:
    count = candidatespage.LIVE_ROWS + 2
    await _report(
        ui,
        daemon,
        *[
            {"query": f"question number {i}", "signal": "other", "target": "demo"}
            for i in range(count)
        ],
    )
    cards = list(_cards(_page(await ui.get("/ui/candidates"))).values())
    assert len(cards) == count
    asked = ['data-live="none"' not in c for c in cards]
    assert asked == [True] * candidatespage.LIVE_ROWS + [False, False]
    assert "ask demo for this one" in cards[-1]


@pytest.mark.parametrize("path", ["/ui/candidates", "/ui/candidates/1"])
@pytest.mark.parametrize(
    ("auth", "status"),
    [
        (None, 401),
        (("oncall", "not-the-token"), 401),
        (("oncall", ADMIN), 200),
        ("bearer", 200),
    ],
)
async def test_the_candidates_need_the_admin_token_as_the_api_does(
    ui: httpx.AsyncClient, daemon: Daemon, path: str, auth: Any, status: int
) -> None:
    """What users asked is shown only to holders of the admin token: as HTTP Basic's password
    (a browser asks for it) or as a Bearer token, like GET /api/v1/candidates."""
    await _report(ui, daemon, {"query": "who can read this", "signal": "other"})
    headers = {"authorization": f"Bearer {ADMIN}"} if auth == "bearer" else {}
    basic = auth if isinstance(auth, tuple) else None
    transport = httpx.ASGITransport(create_app(daemon.service))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", auth=basic
    ) as other:
        response = await other.get(path, headers=headers)
    assert response.status_code == status
    if status == 401:
        assert response.headers["www-authenticate"].startswith('Basic realm="ragcanary')
        assert "who can read this" not in response.text
        assert "RAGCANARY_ADMIN_TOKEN as the password" in response.text
    else:
        assert "who can read this" in response.text


async def test_without_an_admin_token_the_page_says_how_to_set_one(
    ui: httpx.AsyncClient, daemon: Daemon
) -> None:
    await _report(ui, daemon, {"query": "who can read this", "signal": "other"})
    unset = daemon.loaded.config.model_copy(update={"admin_token": None})
    daemon.loaded = dataclasses.replace(daemon.loaded, config=unset)
    response = await ui.get("/ui/candidates")
    assert response.status_code == 403
    assert "www-authenticate" not in response.headers
    assert "who can read this" not in response.text
    assert "Set RAGCANARY_ADMIN_TOKEN for the daemon" in response.text
