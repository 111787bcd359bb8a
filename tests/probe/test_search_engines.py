"""The elasticsearch and opensearch presets on the engines' documented request and answer shapes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]
HITS = {
    "took": 3,
    "hits": {
        "total": {"value": 2, "relation": "eq"},
        "hits": [
            {"_index": "docs", "_id": "a1", "_score": 0.93, "_source": {"doc_id": "guide-1"}},
            {"_index": "docs", "_id": "b2", "_score": 0.71, "_source": {"doc_id": "guide-2"}},
        ],
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _target(preset: str, answer: httpx.Response, **fields: Any) -> tuple[Any, Any, list[Any]]:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), json.loads(request.content)))
        return answer

    config = TargetConfig(
        **({"preset": preset, "url": "https://search.test:9200/", "collection": "docs"} | fields)
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("es", config, client), client, seen


async def test_elasticsearch_knn_uses_the_search_api_knn_option() -> None:
    target, client, seen = _target(
        "elasticsearch",
        httpx.Response(200, json=HITS),
        embedding="minilm",
        vector_field="embedding",
    )
    async with client:
        got = await target.search("reset password", 5, VECTOR)
    assert (got.outcome, got.ids, got.scores) == ("ok", ("a1", "b2"), (0.93, 0.71))
    assert seen == [
        (
            "POST",
            "https://search.test:9200/docs/_search",
            {
                "size": 5,
                "_source": False,
                "knn": {"field": "embedding", "query_vector": VECTOR, "k": 5, "num_candidates": 50},
            },
        )
    ]


async def test_opensearch_knn_is_a_knn_query_and_ids_can_come_from_the_source() -> None:
    target, client, seen = _target(
        "opensearch",
        httpx.Response(200, json=HITS),
        embedding="minilm",
        vector_field="embedding",
        id="_source.doc_id",
    )
    async with client:
        got = await target.search("reset password", 3, VECTOR)
    assert got.ids == ("guide-1", "guide-2")
    assert seen[0][2] == {
        "size": 3,
        "_source": ["doc_id"],
        "query": {"knn": {"embedding": {"vector": VECTOR, "k": 3}}},
    }


@pytest.mark.parametrize("preset", ["elasticsearch", "opensearch"])
async def test_without_an_embedding_it_is_a_bm25_match_on_the_text_field(preset: str) -> None:
    target, client, seen = _target(preset, httpx.Response(200, json=HITS), text_field="content")
    async with client:
        got = await target.search("reset password", 10)
    assert got.outcome == "ok"
    assert seen[0][2] == {
        "size": 10,
        "_source": False,
        "query": {"match": {"content": "reset password"}},
    }


async def test_a_missing_index_says_so_in_the_engines_words() -> None:
    error = {
        "error": {"type": "index_not_found_exception", "reason": "no such index [docs]"},
        "status": 404,
    }
    target, client, _ = _target(
        "elasticsearch", httpx.Response(404, json=error), text_field="content"
    )
    async with client:
        got = await target.search("q", 3)
    assert got.outcome == "http_4xx"
    assert "no such index [docs]" in (got.error or "")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        pytest.param({}, "embedding and vector_field (kNN) or text_field (BM25)", id="no-mode"),
        pytest.param({"embedding": "m"}, "needs vector_field", id="knn-without-field"),
        pytest.param(
            {"embedding": "m", "vector_field": "v", "text_field": "t"}, "both set", id="both"
        ),
        pytest.param({"text_field": "t", "score_order": "asc"}, "similarities", id="asc"),
        pytest.param({"text_field": "t", "collection": None}, "needs collection", id="no-index"),
    ],
)
def test_a_search_engine_config_says_what_is_missing(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        TargetConfig(
            **({"preset": "elasticsearch", "url": "http://es:9200", "collection": "docs"} | fields)
        )
    assert says in str(raised.value)


def _routed(preset: str, routes: dict[str, Any], **fields: Any) -> tuple[Any, Any, list[Any]]:
    """A target whose server answers each ``METHOD path`` with ``routes[...]`` (a JSON body)."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, str(request.url), body))
        return httpx.Response(200, json=routes[f"{request.method} {request.url.path}"])

    config = TargetConfig(
        **(
            {"preset": preset, "url": "https://search.test:9200/", "collection": "docs"}
            | {"text_field": "content"}
            | fields
        )
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("es", config, client), client, seen


@pytest.mark.parametrize("preset", ["elasticsearch", "opensearch"])
async def test_missing_asks_mget_for_the_ids_without_their_source(preset: str) -> None:
    docs = {
        "docs": [
            {"_index": "docs", "_id": "a1", "_version": 1, "found": True},
            {"_index": "docs", "_id": "gone", "found": False},
        ]
    }
    target, client, seen = _routed(preset, {"POST /docs/_mget": docs})
    async with client:
        got = await target.missing(["a1", "gone"])
    assert got == {"gone"}
    assert seen == [
        ("POST", "https://search.test:9200/docs/_mget?_source=false", {"ids": ["a1", "gone"]})
    ]


async def test_missing_cannot_tell_when_a_shard_failed_to_answer_mget() -> None:
    docs = {"docs": [{"_index": "docs", "_id": "a1", "error": {"type": "shard_failure"}}]}
    target, client, _ = _routed("elasticsearch", {"POST /docs/_mget": docs})
    async with client:
        assert await target.missing(["a1"]) is None


def _mapping(spec: dict[str, Any]) -> dict[str, Any]:
    """The field mapping API's answer for ``doc_id`` in the index docs."""
    field = {"full_name": "doc_id", "mapping": {"doc_id": spec}}
    return {"docs": {"mappings": {"doc_id": field}}}


async def test_missing_finds_a_source_id_with_a_terms_query_on_its_keyword_field() -> None:
    text_and_keyword = {
        "type": "text",
        "fields": {"keyword": {"type": "keyword", "ignore_above": 8}},
    }
    hits = {"hits": {"hits": [{"_id": "c1", "_score": 1.0, "_source": {"doc_id": "guide-1"}}]}}
    routes = {
        "GET /docs/_mapping/field/doc_id": _mapping(text_and_keyword),
        "POST /docs/_search": hits,
    }
    target, client, seen = _routed("opensearch", routes, id="_source.doc_id")
    async with client:
        got = await target.missing(["guide-1", "guide-2", "a-very-long-id"])
    # Values longer than ignore_above are not indexed: a terms query cannot tell of them.
    assert got == {"guide-2"}
    assert seen[1][2] == {
        "size": 1000,
        "_source": ["doc_id"],
        "track_total_hits": False,
        "query": {"terms": {"doc_id.keyword": ["guide-1", "guide-2"]}},
    }


async def test_missing_cannot_tell_of_a_source_id_in_a_text_field() -> None:
    routes = {"GET /docs/_mapping/field/doc_id": _mapping({"type": "text"})}
    target, client, seen = _routed("elasticsearch", routes, id="_source.doc_id")
    async with client:
        assert await target.missing(["guide-1"]) is None
    assert len(seen) == 1  # no terms query on words
