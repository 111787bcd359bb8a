"""The milvus and pinecone presets on the vendors' documented shapes (no server ships here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import PRESETS, make_target

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _target(answer: httpx.Response, **fields: Any) -> tuple[Any, Any, list[Any]]:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, dict(request.headers), json.loads(request.content)))
        return answer

    config = TargetConfig(**({"url": "https://db.test/", "retries": 0} | fields))
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("db", config, client), client, seen


def test_every_preset_of_the_config_has_an_adapter() -> None:
    allowed = TargetConfig.model_fields["preset"].annotation.__args__  # type: ignore[union-attr]
    assert set(PRESETS) == set(allowed)


async def test_milvus_search_reads_data_and_an_output_field_as_the_id() -> None:
    answer = {
        "code": 0,
        "cost": 0,
        "data": [
            {"id": 11, "distance": 0.93, "doc_id": "g-1"},
            {"id": 12, "distance": 0.5, "doc_id": "g-2"},
        ],
    }
    target, client, seen = _target(
        httpx.Response(200, json=answer),
        preset="milvus",
        collection="docs",
        embedding="m",
        vector_field="dense",
        id="doc_id",
    )
    async with client:
        got = await target.search("q", 2, VECTOR)
    assert (got.outcome, got.ids, got.scores) == ("ok", ("g-1", "g-2"), (0.93, 0.5))
    path, _, body = seen[0]
    assert path == "/v2/vectordb/entities/search"
    assert body == {
        "collectionName": "docs",
        "data": [VECTOR],
        "limit": 2,
        "outputFields": ["doc_id"],
        "annsField": "dense",
    }


async def test_a_milvus_error_inside_a_200_is_a_failure_with_its_message() -> None:
    answer = {"code": 100, "message": "collection not found[collection=docs]"}
    target, client, _ = _target(
        httpx.Response(200, json=answer), preset="milvus", collection="docs", embedding="m"
    )
    async with client:
        got = await target.search("q", 2, VECTOR)
    assert got.outcome == "bad_response"
    assert "milvus error 100: collection not found[collection=docs]" in (got.error or "")


async def test_pinecone_query_by_vector_in_a_namespace() -> None:
    answer = {
        "matches": [{"id": "v-1", "score": 0.88, "metadata": {"doc_id": "g-1"}}],
        "namespace": "prod",
    }
    target, client, seen = _target(
        httpx.Response(200, json=answer),
        preset="pinecone",
        collection="prod",
        embedding="m",
        id="metadata.doc_id",
        headers={"Api-Key": "pc-key"},
    )
    async with client:
        got = await target.search("q", 4, VECTOR)
    assert (got.ids, got.scores) == (("g-1",), (0.88,))
    path, headers, body = seen[0]
    assert path == "/query"
    assert headers["x-pinecone-api-version"] == "2025-04"
    assert headers["api-key"] == "pc-key"
    assert body == {
        "vector": VECTOR,
        "topK": 4,
        "namespace": "prod",
        "includeMetadata": True,
        "includeValues": False,
    }


async def test_pinecone_without_an_embedding_lets_the_index_embed_the_text() -> None:
    answer = {"result": {"hits": [{"_id": "r-1", "_score": 0.7, "fields": {"chunk": "..."}}]}}
    target, client, seen = _target(httpx.Response(200, json=answer), preset="pinecone")
    async with client:
        got = await target.search("reset my password", 3)
    assert (got.ids, got.scores) == (("r-1",), (0.7,))
    path, _, body = seen[0]
    assert path == "/records/namespaces/__default__/search"
    assert body == {"query": {"inputs": {"text": "reset my password"}, "top_k": 3}}


def _routed(routes: dict[str, list[Any]], **fields: Any) -> tuple[Any, Any, list[Any]]:
    """A target whose server answers a path with the next JSON body of ``routes[path]``."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url, body))
        return httpx.Response(200, json=routes[request.url.path].pop(0))

    config = TargetConfig(**({"url": "https://db.test/", "retries": 0} | fields))
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("db", config, client), client, seen


def _described(*fields: dict[str, Any], dynamic: bool = False) -> dict[str, Any]:
    """Milvus's REST v2 collections/describe answer."""
    data = {"collectionName": "docs", "fields": list(fields), "enableDynamicField": dynamic}
    return {"code": 0, "data": data}


@pytest.mark.parametrize(
    ("field", "ids", "data", "expected_filter", "missing"),
    [
        pytest.param(
            {"name": "id", "type": "Int64", "primaryKey": True},
            ["11", "12", "g-1"],
            [{"id": 11}],
            "id in [11, 12]",
            {"12", "g-1"},  # an Int64 key cannot be g-1
            id="int64-key",
        ),
        pytest.param(
            {"name": "id", "type": "VarChar(64)", "primaryKey": True},
            ["a", 'say "hi"'],
            [{"id": 'say "hi"'}],
            'id in ["a", "say \\"hi\\""]',
            {"a"},
            id="varchar-key",
        ),
    ],
)
async def test_milvus_missing_queries_the_id_field_with_values_of_its_type(
    field: dict[str, Any], ids: list[str], data: Any, expected_filter: str, missing: set[str]
) -> None:
    routes = {
        "/v2/vectordb/collections/describe": [_described(field)],
        "/v2/vectordb/entities/query": [{"code": 0, "cost": 0, "data": data}],
    }
    target, client, seen = _routed(
        routes, preset="milvus", collection="docs", embedding="m", database="kb"
    )
    async with client:
        got = await target.missing(ids)
    assert got == missing
    assert [body for _, _, body in seen] == [
        {"collectionName": "docs", "dbName": "kb"},
        {
            "collectionName": "docs",
            "filter": expected_filter,
            "outputFields": ["id"],
            "limit": 1000,
            "dbName": "kb",
        },
    ]


async def test_milvus_missing_asks_a_dynamic_field_for_text_and_numbers() -> None:
    routes = {
        "/v2/vectordb/collections/describe": [
            _described({"name": "id", "type": "Int64", "primaryKey": True}, dynamic=True)
        ],
        "/v2/vectordb/entities/query": [{"code": 0, "data": [{"doc_id": 7}]}],
    }
    target, client, seen = _routed(
        routes, preset="milvus", collection="docs", embedding="m", id="doc_id"
    )
    async with client:
        assert await target.missing(["7", "g-2"]) == {"g-2"}
    assert seen[1][2]["filter"] == 'doc_id in ["7", "g-2"] or doc_id in [7]'


async def test_milvus_missing_cannot_tell_of_an_error_or_a_json_path() -> None:
    routes = {"/v2/vectordb/collections/describe": [{"code": 100, "message": "no collection"}]}
    target, client, _ = _routed(routes, preset="milvus", collection="docs", embedding="m")
    async with client:
        assert await target.missing(["1"]) is None
    target, client, seen = _routed(
        {}, preset="milvus", collection="docs", embedding="m", id="meta.doc_id"
    )
    async with client:
        assert await target.missing(["1"]) is None
    assert seen == []


async def test_pinecone_missing_fetches_the_ids_of_the_namespace() -> None:
    fetched = {
        "vectors": {"v-1": {"id": "v-1", "values": [0.1, 0.2]}},
        "namespace": "prod",
        "usage": {"readUnits": 1},
    }
    target, client, seen = _routed(
        {"/vectors/fetch": [fetched]}, preset="pinecone", collection="prod", embedding="m"
    )
    async with client:
        got = await target.missing(["v-1", "v-2", "with space"])
    assert got == {"v-2"}  # fetch takes no id with a space, and no record has one
    method, url, _ = seen[0]
    assert method == "GET"
    assert url.params.get_list("ids") == ["v-1", "v-2"]
    assert url.params["namespace"] == "prod"


async def test_pinecone_cannot_look_up_a_metadata_id() -> None:
    target, client, seen = _routed({}, preset="pinecone", embedding="m", id="metadata.doc_id")
    async with client:
        assert await target.missing(["g-1"]) is None
    assert seen == []
