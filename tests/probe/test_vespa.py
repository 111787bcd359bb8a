"""The vespa preset on Vespa's documented query API requests and answers (no server here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets.vespa import VespaTarget

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]
RESULT = {
    "root": {
        "id": "toplevel",
        "relevance": 1.0,
        "fields": {"totalCount": 2},
        "coverage": {"coverage": 100, "documents": 1000, "full": True, "nodes": 1},
        "children": [
            {
                "id": "id:docs:doc::guide-1",
                "relevance": 0.87,
                "source": "content",
                "fields": {"doc_id": "g-1", "sddocname": "doc"},
            },
            {
                "id": "id:docs:doc::guide-2",
                "relevance": 0.61,
                "source": "content",
                "fields": {"doc_id": "g-2", "sddocname": "doc"},
            },
        ],
    }
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _errors(*errors: dict[str, Any]) -> dict[str, Any]:
    return {
        "root": {
            "id": "toplevel",
            "relevance": 1.0,
            "fields": {"totalCount": 0},
            "errors": list(errors),
        }
    }


def _target(*answers: httpx.Response, **fields: Any) -> tuple[Any, Any, list[Any]]:
    """A target whose server gives ``answers`` in turn; ``seen`` holds (method, URL, body)."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), json.loads(request.content)))
        return answers[len(seen) - 1]

    given = {"preset": "vespa", "url": "https://app.vespa.test", "retries": 0}
    config = TargetConfig(**(given | fields))
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return VespaTarget("vs", config, client, sleep=_no_sleep), client, seen


async def _no_sleep(seconds: float) -> None:
    return None


async def test_nearest_neighbor_sends_the_vector_as_a_query_input() -> None:
    target, client, seen = _target(
        httpx.Response(200, json=RESULT),
        embedding="m",
        vector_field="embedding",
        collection="doc",
        rank_profile="semantic",
    )
    async with client:
        got = await target.search("reset my password", 5, VECTOR)
    assert (got.outcome, got.ids, got.scores) == (
        "ok",
        ("id:docs:doc::guide-1", "id:docs:doc::guide-2"),
        (0.87, 0.61),
    )
    assert seen == [
        (
            "POST",
            "https://app.vespa.test/search/",
            {
                "yql": "select * from sources doc where "
                "{targetHits:5}nearestNeighbor(embedding, q)",
                "input.query(q)": VECTOR,
                "hits": 5,
                "ranking": "semantic",
            },
        )
    ]


async def test_a_text_search_keeps_the_canary_out_of_the_yql() -> None:
    target, client, seen = _target(
        httpx.Response(200, json=RESULT), id="fields.doc_id", text_field="title"
    )
    async with client:
        got = await target.search('x") or true or ("', 3)
    assert got.ids == ("g-1", "g-2")
    assert seen[0][2] == {
        "yql": "select * from sources * where userQuery()",
        "query": 'x") or true or ("',
        "hits": 3,
        "model.defaultIndex": "title",
    }


async def test_a_named_query_tensor_is_the_one_sent() -> None:
    target, client, seen = _target(
        httpx.Response(200, json=RESULT),
        embedding="m",
        vector_field="dense",
        query_tensor="query_embedding",
    )
    async with client:
        await target.search("q", 2, VECTOR)
    body = seen[0][2]
    assert body["yql"].endswith("{targetHits:2}nearestNeighbor(dense, query_embedding)")
    assert body["input.query(query_embedding)"] == VECTOR


async def test_no_children_is_an_empty_answer() -> None:
    nothing = {"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": 0}}}
    target, client, _ = _target(httpx.Response(200, json=nothing))
    async with client:
        got = await target.search("q", 3)
    assert (got.outcome, got.ids) == ("empty", ())


async def test_an_error_status_shows_vespas_message_and_the_fix() -> None:
    error = _errors(
        {
            "code": 4,
            "summary": "Invalid query parameter",
            "message": "Could not set 'ranking.features.query(q)' to '[0.5, -0.25, 0.125]': "
            "Expected 'query(q)' to be a tensor, but it is the string '[0.5, -0.25, 0.125]'",
        }
    )
    target, client, _ = _target(
        httpx.Response(400, json=error), embedding="m", vector_field="embedding"
    )
    async with client:
        got = await target.search("q", 3, VECTOR)
    assert got.outcome == "http_4xx"
    assert (got.error or "").startswith(
        "HTTP 400 Bad Request: vespa error 4 (Invalid query parameter): Could not set"
    )
    assert (got.error or "").endswith(
        "; the rank profile must declare the input query(q) of the embedding's type: "
        "set rank_profile: to one that does"
    )


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        pytest.param(12, "timeout", id="timeout-is-retried"),
        pytest.param(10, "http_5xx", id="backend-communication-is-retried"),
        pytest.param(3, "bad_response", id="illegal-query-is-not"),
    ],
)
async def test_errors_beside_partial_hits_in_a_200_fail_the_query(code: int, outcome: str) -> None:
    partial = json.loads(json.dumps(RESULT))
    partial["root"]["errors"] = [{"code": code, "summary": "Some", "message": "went wrong"}]
    answer = httpx.Response(200, json=partial)
    target, client, seen = _target(answer, answer, retries=1)
    async with client:
        got = await target.search("q", 3)
    assert (got.outcome, got.ids) == (outcome, ())
    assert f"vespa error {code} (Some): went wrong" in (got.error or "")
    assert len(seen) == (1 if outcome == "bad_response" else 2)


async def test_a_refused_token_names_the_header() -> None:
    error = _errors({"code": 14, "summary": "Unauthorized", "message": "Token is not valid"})
    target, client, _ = _target(
        httpx.Response(401, json=error), headers={"Authorization": "Bearer vs-token"}
    )
    async with client:
        got = await target.search("q", 3)
    assert got.error == (
        "HTTP 401 Unauthorized: vespa error 14 (Unauthorized): Token is not valid; Vespa Cloud "
        'takes a data-plane token as headers: {Authorization: "Bearer ${VESPA_TOKEN}"}'
    )


def _documents(
    held: dict[str, str], sleep: Any = _no_sleep, **fields: Any
) -> tuple[VespaTarget, httpx.AsyncClient, list[str]]:
    """A target whose /document/v1 holds ``held`` (path -> document id); ``seen`` the URLs."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        path = request.url.raw_path.decode().split("?")[0]
        if path in held:
            document = {"pathId": path, "id": held[path], "fields": {}}
            return httpx.Response(200, json=document)
        return httpx.Response(404, json={"pathId": path, "id": "id:docs:doc::?"})

    given = {"preset": "vespa", "url": "https://app.vespa.test", "retries": 0} | fields
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return VespaTarget("vs", TargetConfig(**given), client, sleep=sleep), client, seen


async def test_missing_gets_each_document_by_the_namespace_and_type_in_its_id() -> None:
    held = {
        "/document/v1/docs/doc/docid/guide-1": "id:docs:doc::guide-1",
        "/document/v1/docs/doc/number/7/a%2Fb": "id:docs:doc:n=7:a/b",
    }
    target, client, seen = _documents(held, text_field="title")
    async with client:
        got = await target.missing(
            ["id:docs:doc::guide-1", "id:docs:doc::gone", "id:docs:doc:n=7:a/b", "index:x/0/1"]
        )
    assert got == {"id:docs:doc::gone"}
    assert seen == [  # an index:... hit id is no document id: it cannot be looked up
        "https://app.vespa.test/document/v1/docs/doc/docid/guide-1?fieldSet=%5Bid%5D",
        "https://app.vespa.test/document/v1/docs/doc/docid/gone?fieldSet=%5Bid%5D",
        "https://app.vespa.test/document/v1/docs/doc/number/7/a%2Fb?fieldSet=%5Bid%5D",
    ]


async def test_a_404_that_is_not_the_document_apis_cannot_tell() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="<html>Not Found</html>")

    config = TargetConfig(preset="vespa", url="https://app.vespa.test", text_field="title")
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    async with client:
        target = VespaTarget("vs", config, client, sleep=_no_sleep)
        assert await target.missing(["id:docs:doc::guide-1"]) is None


async def test_a_summary_field_id_cannot_be_looked_up() -> None:
    target, client, seen = _documents({}, id="fields.doc_id", text_field="title")
    async with client:
        assert await target.missing(["g-1"]) is None
    assert seen == []


async def test_lookups_keep_to_the_rate_limit() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    target, client, _ = _documents({}, sleep, text_field="title", rate_limit="4/s")
    async with client:
        assert await target.missing(["id:docs:doc::a", "id:docs:doc::b"]) == {
            "id:docs:doc::a",
            "id:docs:doc::b",
        }
    assert pauses == [0.25, 0.25]
