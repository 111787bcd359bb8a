"""The generic target's `lookup:`: a GET per id; 200 held, 404 gone, anything else cannot tell."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.target import HttpTarget
from ragcanary.probe.url_lookup import MAX_LOOKUP_IDS, lookup_url

pytestmark = pytest.mark.anyio
URL = "https://search.test/v2/query"
Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_sleep(seconds: float) -> None:
    return None


def _held(*held: str) -> Handler:
    """A lookup endpoint at /docs/{id}: 200 for ``held``, 404 (an HTML page) for the rest."""

    def handler(request: httpx.Request) -> httpx.Response:
        doc = request.url.raw_path.decode("ascii").removeprefix("/docs/")
        if doc in held:
            return httpx.Response(200, json={"id": doc})
        return httpx.Response(404, text="<html><body>Not Found</body></html>")

    return handler


async def _missing(
    handler: Handler, ids: list[str], sleep: Any = _no_sleep, **fields: Any
) -> tuple[set[str] | None, list[httpx.Request], HttpTarget]:
    """What the target's ``missing`` says of ``ids``, the requests it sent, and the target."""
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    given = {"url": URL, "body": {"q": "{query}"}, "lookup": "/docs/{id}", "retries": 0}
    config = TargetConfig(**(given | fields))
    async with httpx.AsyncClient(transport=httpx.MockTransport(recording)) as client:
        target = HttpTarget("kb", config, client, sleep=sleep)
        got = await target.missing(ids)
    return got, seen, target


async def test_200_is_held_and_404_is_gone_each_id_asked_once() -> None:
    got, seen, _ = await _missing(_held("a", "c"), ["a", "b", "c", "b"])
    assert got == {"b"}
    assert [str(r.url) for r in seen] == [f"https://search.test/docs/{i}" for i in "abc"]
    assert {r.method for r in seen} == {"GET"}


async def test_the_target_s_headers_go_with_each_lookup() -> None:
    got, seen, _ = await _missing(_held("a"), ["a"], headers={"X-Api-Key": "k-123"})
    assert got == set()
    assert seen[0].headers["X-Api-Key"] == "k-123"


async def test_an_id_is_percent_encoded_whole_into_the_template() -> None:
    held = lookup_url("{id}", "guides/setup?v=2#top")
    got, seen, _ = await _missing(_held(held), ["guides/setup?v=2#top", "ü"])
    assert got == {"ü"}
    assert [r.url.raw_path for r in seen] == [
        b"/docs/guides%2Fsetup%3Fv%3D2%23top",
        b"/docs/%C3%BC",
    ]


async def test_an_absolute_template_with_a_query_is_asked_as_written() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.url.params["doc"] == "a&b" else 404)

    got, seen, _ = await _missing(handler, ["a&b", "c"], lookup="https://docs.test/exists?doc={id}")
    assert got == {"c"}
    assert str(seen[0].url) == "https://docs.test/exists?doc=a%26b"


@pytest.mark.parametrize("status", [500, 503, 401, 403, 400, 204, 410])
async def test_any_other_status_cannot_tell(status: int) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/docs/b":
            return httpx.Response(status, json={"error": "nope"})
        return httpx.Response(404)

    got, _, _ = await _missing(handler, ["a", "b", "c"])
    assert got is None  # "a" was gone, yet one unreadable answer says nothing of the lookup


async def test_a_timeout_cannot_tell() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    got, _, _ = await _missing(handler, ["a"])
    assert got is None


async def test_a_refused_connection_cannot_tell() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    got, _, _ = await _missing(handler, ["a"])
    assert got is None


async def test_a_failed_lookup_is_retried_like_a_query() -> None:
    answers = iter([httpx.Response(503), httpx.Response(404)])
    got, seen, _ = await _missing(lambda request: next(answers), ["a"], retries=1)
    assert got == {"a"}
    assert len(seen) == 2


async def test_lookups_keep_to_the_rate_limit() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    got, _, _ = await _missing(_held(), ["a", "b"], sleep, rate_limit="4/s")
    assert got == {"a", "b"}
    assert pauses == [0.25, 0.25]


async def test_more_ids_than_the_bound_cannot_tell_and_send_nothing() -> None:
    ids = [f"d{i}" for i in range(MAX_LOOKUP_IDS + 1)]
    got, seen, _ = await _missing(_held(), ids)
    assert got is None
    assert seen == []
    got, seen, _ = await _missing(_held(), ids[:MAX_LOOKUP_IDS])
    assert got == set(ids[:MAX_LOOKUP_IDS])


async def test_without_lookup_the_generic_target_cannot_tell() -> None:
    got, seen, _ = await _missing(_held(), ["a"], lookup=None)
    assert got is None
    assert seen == []


async def test_the_canary_s_request_stays_the_one_shown() -> None:
    _, _, target = await _missing(_held(), ["a"])
    assert target.last_request is None
