"""The milvus and pinecone presets on the vendors' documented shapes (no server ships here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.model import TargetConfig
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
