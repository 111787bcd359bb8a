"""What a target may do to us with redirects and ids, against real servers on 127.0.0.1.

Two servers on two ports are two origins: the first answers with a redirect, the second
records every header it receives. Configured headers (secrets) must never reach another
origin (nor the Authorization a URL's ``user:password@`` becomes); ids that are a secret or
far too long must never be stored.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from retrievers import ServerThread

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.redact import Redactor

SECRET = "sk-redirect-secret-9f2e"
HITS = {"hits": [{"id": "doc-1", "score": 0.9}, {"id": "doc-2", "score": 0.8}]}


class Origin:
    """One server: answers ``answer(path)`` and records the headers of every request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.answer: Any = lambda path: (200, {}, HITS)
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                origin.seen.append({k.lower(): v for k, v in self.headers.items()})
                status, headers, body = origin.answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serving = ServerThread(Handler)

    @property
    def base(self) -> str:
        host, port = self._serving.address
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._serving.stop()


@pytest.fixture
def origins() -> Iterator[tuple[Origin, Origin]]:
    first, second = Origin(), Origin()
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()


def _search(url: str, **fields: Any) -> Answer:
    config = TargetConfig(
        url=url,
        headers={"X-Api-Key": SECRET, "Authorization": f"Bearer {SECRET}"},
        body={"q": "{query}"},
        retries=0,
        **fields,
    )

    async def search() -> Answer:
        async with make_client(config) as client:
            target = HttpTarget("t", config, client, redact=Redactor([SECRET]))
            return await target.search("question", 5)

    return asyncio.run(search())


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_and_sends_it_nothing(
    origins: tuple[Origin, Origin], status: int
) -> None:
    first, second = origins
    first.answer = lambda path: (status, {"Location": f"{second.base}/search"}, {})
    answer = _search(f"{first.base}/search")
    assert answer.outcome == "bad_response"
    assert "another origin" in (answer.error or "")
    assert "follow_redirects: any" in (answer.error or "")
    assert second.seen == []


def test_a_redirect_within_the_origin_is_followed_with_the_headers(
    origins: tuple[Origin, Origin],
) -> None:
    first, _ = origins
    first.answer = lambda path: (
        (307, {"Location": "/v2/search"}, {}) if path == "/search" else (200, {}, HITS)
    )
    answer = _search(f"{first.base}/search")
    assert answer.outcome == "ok"
    assert answer.ids == ("doc-1", "doc-2")
    assert first.seen[-1]["x-api-key"] == SECRET


def test_follow_redirects_any_drops_every_configured_header_across_origins(
    origins: tuple[Origin, Origin],
) -> None:
    first, second = origins
    first.answer = lambda path: (302, {"Location": f"{second.base}/search"}, {})
    answer = _search(f"{first.base}/search", follow_redirects="any")
    assert answer.outcome == "ok"
    assert len(second.seen) == 1
    assert "x-api-key" not in second.seen[0]
    assert "authorization" not in second.seen[0]
    assert SECRET not in json.dumps(second.seen)


def test_redirect_loops_end_as_a_bad_response(origins: tuple[Origin, Origin]) -> None:
    first, _ = origins
    first.answer = lambda path: (302, {"Location": "/search"}, {})
    answer = _search(f"{first.base}/search")
    assert answer.outcome == "bad_response"
    assert "redirects" in (answer.error or "")


def test_an_id_over_512_characters_is_a_bad_response(origins: tuple[Origin, Origin]) -> None:
    first, _ = origins
    first.answer = lambda path: (200, {}, {"hits": [{"id": "x" * 1_000_000, "score": 1.0}]})
    answer = _search(f"{first.base}/search", max_response_bytes=5_000_000)
    assert answer.outcome == "bad_response"
    assert "512" in (answer.error or "")
    assert answer.ids == ()


def test_an_id_that_is_a_secret_is_refused_and_one_holding_it_is_kept(
    origins: tuple[Origin, Origin],
) -> None:
    """An id that *is* a secret is never stored (the query fails, the reason does not show it);
    an id that merely contains one is the target's data, stored as returned."""
    first, _ = origins
    first.answer = lambda path: (200, {}, {"hits": [{"id": SECRET, "score": 1.0}]})
    refused = _search(f"{first.base}/search")
    assert (refused.outcome, refused.ids) == ("bad_response", ())
    assert SECRET not in (refused.error or "")
    first.answer = lambda path: (200, {}, {"hits": [{"id": f"doc-{SECRET}", "score": 1.0}]})
    kept = _search(f"{first.base}/search")
    assert (kept.outcome, kept.ids) == ("ok", (f"doc-{SECRET}",))


def _search_as_user(url: str, **fields: Any) -> Answer:
    """A query to ``url``, which carries ``user:SECRET@``, with no configured header."""
    config = TargetConfig(url=url, body={"q": "{query}"}, retries=0, **fields)

    async def search() -> Answer:
        async with make_client(config) as client:
            return await HttpTarget("t", config, client, redact=Redactor([SECRET])).search("q", 5)

    return asyncio.run(search())


BASIC = "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()


def test_url_credentials_follow_a_redirect_within_the_origin(
    origins: tuple[Origin, Origin],
) -> None:
    first, _ = origins
    first.answer = lambda path: (
        (307, {"Location": "/v2/search"}, {}) if path == "/search" else (200, {}, HITS)
    )
    answer = _search_as_user(f"{first.base.replace('//', f'//user:{SECRET}@')}/search")
    assert answer.outcome == "ok", answer
    assert [seen.get("authorization") for seen in first.seen] == [BASIC, BASIC]


def test_url_credentials_are_dropped_on_a_redirect_to_another_origin(
    origins: tuple[Origin, Origin],
) -> None:
    """The Authorization made from the URL's user:password is a configured header like any
    other: with ``follow_redirects: any`` the other origin gets nothing of it."""
    first, second = origins
    first.answer = lambda path: (302, {"Location": f"{second.base}/search"}, {})
    url = f"{first.base.replace('//', f'//user:{SECRET}@')}/search"
    answer = _search_as_user(url, follow_redirects="any")
    assert answer.outcome == "ok", answer
    assert first.seen[0]["authorization"] == BASIC
    assert len(second.seen) == 1
    assert "authorization" not in second.seen[0]
    assert SECRET not in json.dumps(second.seen)
    assert BASIC.split()[1] not in json.dumps(second.seen)


def test_the_production_client_follows_no_redirect_by_itself() -> None:
    config = TargetConfig(url="http://127.0.0.1:1/search", body={"q": "{query}"})
    client = make_client(config)
    try:
        assert client.follow_redirects is False
    finally:
        asyncio.run(client.aclose())
    assert isinstance(client, httpx.AsyncClient)
