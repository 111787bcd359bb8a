"""The qdrant preset on Qdrant's documented request and answer shapes (no server ships here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.model import TargetConfig
from ragcanary.probe.presets import make_target

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]
POINTS = {
    "result": {
        "points": [
            {"id": 7, "version": 1, "score": 0.91, "payload": {"doc_id": "guide-1"}},
            {"id": "5c56c793-69f3-4fbf-87e6-c4bf54c28c26", "score": 0.42, "payload": {}},
        ]
    },
    "status": "ok",
    "time": 0.002,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _info(vectors: Any) -> dict[str, Any]:
    return {"result": {"status": "green", "config": {"params": {"vectors": vectors}}}}


def _target(
    info: httpx.Response, answer: httpx.Response, **fields: Any
) -> tuple[Any, Any, list[Any]]:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        assert request.headers["api-key"] == "qd-key"
        if request.method == "GET" and request.url.path == "/collections":
            return httpx.Response(200, json={"result": {"collections": [{"name": "handbook"}]}})
        return info if request.method == "GET" else answer

    config = TargetConfig(
        **(
            {
                "preset": "qdrant",
                "url": "http://qdrant.test:6333",
                "collection": "docs",
                "embedding": "minilm",
                "headers": {"api-key": "qd-key"},
                "retries": 0,
            }
            | fields
        )
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("qd", config, client), client, seen


async def test_points_become_ranked_ids_and_scores() -> None:
    info = httpx.Response(200, json=_info({"size": 3, "distance": "Cosine"}))
    target, client, seen = _target(info, httpx.Response(200, json=POINTS))
    async with client:
        got = await target.search("q", 5, VECTOR)
    assert (got.outcome, got.ids, got.scores) == (
        "ok",
        ("7", "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"),
        (0.91, 0.42),
    )
    assert seen == [
        ("GET", "/collections/docs", None),
        (
            "POST",
            "/collections/docs/points/query",
            {"query": VECTOR, "limit": 5, "with_payload": False},
        ),
    ]


async def test_a_payload_id_and_a_named_vector() -> None:
    info = httpx.Response(200, json=_info({"text": {"size": 3, "distance": "Dot"}}))
    only_payload_ids = {"result": {"points": [POINTS["result"]["points"][0]]}}
    target, client, seen = _target(
        info, httpx.Response(200, json=only_payload_ids), id="payload.doc_id", using="text"
    )
    async with client:
        got = await target.search("q", 2, VECTOR)
    assert got.ids == ("guide-1",)
    assert seen[1][2] == {"query": VECTOR, "limit": 2, "with_payload": ["doc_id"], "using": "text"}


@pytest.mark.parametrize(
    ("vectors", "fields", "says"),
    [
        pytest.param(
            {"text": {"size": 3, "distance": "Cosine"}, "image": {"size": 8, "distance": "Dot"}},
            {},
            "has named vectors image, text, but the target says no using:",
            id="named-without-using",
        ),
        pytest.param(
            {"text": {"size": 3, "distance": "Cosine"}},
            {"using": "txt"},
            "set using: to one of them",
            id="unknown-using",
        ),
        pytest.param(
            {"size": 3, "distance": "Cosine"},
            {"using": "text"},
            "one unnamed vector; remove using:",
            id="using-without-names",
        ),
        pytest.param(
            {"size": 3, "distance": "Euclid"},
            {},
            "uses Euclid distance, whose scores are distances; set score_order: asc",
            id="euclid-read-as-similarity",
        ),
    ],
)
async def test_a_config_that_does_not_fit_the_collection_says_the_fix(
    vectors: Any, fields: dict[str, Any], says: str
) -> None:
    target, client, seen = _target(
        httpx.Response(200, json=_info(vectors)), httpx.Response(200, json=POINTS), **fields
    )
    async with client:
        got = await target.search("q", 5, VECTOR)
    assert got.outcome == "bad_response"
    assert says in (got.error or "")
    assert [method for method, _, _ in seen] == ["GET"]  # the query is never sent


async def test_euclid_with_score_order_asc_is_queried() -> None:
    info = httpx.Response(200, json=_info({"size": 3, "distance": "Euclid"}))
    target, client, _ = _target(info, httpx.Response(200, json=POINTS), score_order="asc")
    async with client:
        got = await target.search("q", 5, VECTOR)
    assert got.outcome == "ok"


async def test_a_missing_collection_names_the_ones_that_exist() -> None:
    missing = httpx.Response(404, json={"status": {"error": "Not found: Collection `docs`"}})
    target, client, _ = _target(missing, httpx.Response(200, json=POINTS))
    async with client:
        got = await target.search("q", 5, VECTOR)
    assert got.outcome == "http_4xx"
    assert "collection 'docs' not found; set collection: to one of handbook" in (got.error or "")
