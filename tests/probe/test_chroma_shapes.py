"""The chroma preset on answers a real server rarely gives: each is an outcome with a reason."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target

pytestmark = pytest.mark.anyio
COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _target(handler: Any) -> Any:
    config = TargetConfig(
        preset="chroma",
        url="http://chroma.test:8000/",
        collection="docs",
        embedding="toy",
        retries=0,
        headers={"X-Chroma-Token": "tok-91"},
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("kb", config, client), client


def _server(query_answers: list[httpx.Response]) -> tuple[Any, list[str]]:
    """Answers the lookup with id c-1, then each query with the next of ``query_answers``."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        assert request.headers["X-Chroma-Token"] == "tok-91"
        if request.method == "GET":
            return httpx.Response(200, json={"id": "c-1", "name": "docs"})
        body = json.loads(request.content)
        assert body == {
            "query_embeddings": [[0.5, 0.25]],
            "n_results": 3,
            "include": ["distances", "metadatas"],
        }
        return query_answers.pop(0)

    return handler, seen


async def test_the_columns_become_ranked_ids_and_distances() -> None:
    answer = {"ids": [["a", "b"]], "distances": [[0.1, 0.4]], "metadatas": [[None, {"x": 1}]]}
    handler, seen = _server([httpx.Response(200, json=answer)])
    target, client = _target(handler)
    async with client:
        got = await target.search("q", 3, [0.5, 0.25])
    assert (got.outcome, got.ids, got.scores) == ("ok", ("a", "b"), (0.1, 0.4))
    assert seen == [f"GET {COLLECTIONS}/docs", f"POST {COLLECTIONS}/c-1/query"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param({"distances": [[0.1]]}, "without ids[0]", id="no-ids"),
        pytest.param({"ids": [["a", "b"]], "distances": [[0.1]]}, "does not match", id="short"),
        pytest.param([1, 2], "other than an object", id="a-list"),
    ],
)
async def test_a_malformed_answer_is_a_bad_response(answer: Any, reason: str) -> None:
    handler, _ = _server([httpx.Response(200, json=answer)])
    target, client = _target(handler)
    async with client:
        got = await target.search("q", 3, [0.5, 0.25])
    assert got.outcome == "bad_response"
    assert reason in (got.error or "")


async def test_the_collection_is_looked_up_again_after_a_4xx() -> None:
    gone = httpx.Response(404, json={"error": "NotFoundError", "message": "no such collection"})
    ok = httpx.Response(200, json={"ids": [["a"]], "distances": [[0.2]], "metadatas": [[{}]]})
    handler, seen = _server([gone, ok])
    target, client = _target(handler)
    async with client:
        first = await target.search("q", 3, [0.5, 0.25])
        second = await target.search("q", 3, [0.5, 0.25])
    assert (first.outcome, second.outcome) == ("http_4xx", "ok")
    assert [s.split()[0] for s in seen] == ["GET", "POST", "GET", "POST"]


async def test_without_a_vector_it_says_to_set_embedding() -> None:
    target, client = _target(lambda request: httpx.Response(500))
    async with client:
        got = await target.search("q", 3)
    assert got.outcome == "bad_response"
    assert "set embedding:" in (got.error or "")


async def test_a_lookup_answered_with_json_nested_too_deep_is_a_bad_response() -> None:
    """Issue 34 item 9: the decoder's RecursionError is said as such, not "adapter failed"."""
    nested = b"[" * 100_000 + b"]" * 100_000

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=nested)

    target, client = _target(handler)
    async with client:
        got = await target.search("q", 3, [0.5, 0.25])
    assert got.outcome == "bad_response"
    assert got.error == (
        f"the answer of GET http://chroma.test:8000{COLLECTIONS}/docs is not JSON: "
        "JSON nested deeper than the JSON decoder follows"
    )


async def test_ids_holding_the_token_are_kept_and_the_token_itself_is_refused() -> None:
    """A preset's ids are read like the generic target's: never rewritten by the redactor."""
    answer = {"ids": [["tok-91-a", "b-tok-91"]], "distances": [[0.1, 0.4]]}
    refused = {"ids": [["a", "tok-91"]], "distances": [[0.1, 0.4]]}
    handler, _ = _server([httpx.Response(200, json=answer), httpx.Response(200, json=refused)])
    target, client = _target(handler)
    async with client:
        kept = await target.search("q", 3, [0.5, 0.25])
        secret = await target.search("q", 3, [0.5, 0.25])
    assert (kept.outcome, kept.ids) == ("ok", ("tok-91-a", "b-tok-91"))
    assert (secret.outcome, secret.ids) == ("bad_response", ())
    assert "tok-91" not in (secret.error or "")
