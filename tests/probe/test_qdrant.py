"""The qdrant preset on Qdrant's documented request and answer shapes (no server ships here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target
from ragcanary.probe.retries import QueryFailed

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


UUID = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"


def _looking_up(
    posts: dict[str, list[httpx.Response]], **fields: Any
) -> tuple[Any, Any, list[Any]]:
    """A target on a fine collection whose POSTs to a path get ``posts[path]`` in turn."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        if request.method == "GET":
            return httpx.Response(200, json=_info({"size": 3, "distance": "Cosine"}))
        return posts[request.url.path].pop(0)

    config = TargetConfig(
        **(
            {
                "preset": "qdrant",
                "url": "http://qdrant.test:6333",
                "collection": "docs",
                "embedding": "minilm",
                "retries": 0,
            }
            | fields
        )
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("qd", config, client), client, seen


async def test_missing_retrieves_point_ids_and_reports_those_not_held() -> None:
    held = {"result": [{"id": 7, "payload": None, "vector": None}, {"id": UUID}], "status": "ok"}
    points = {"/collections/docs/points": [httpx.Response(200, json=held)]}
    target, client, seen = _looking_up(points)
    async with client:
        got = await target.missing(["7", UUID, "8", "guide-1", "07"])
    # Only unsigned integers and UUIDs can be point ids: the others cannot be held.
    assert got == {"8", "guide-1", "07"}
    assert seen[-1] == (
        "POST",
        "/collections/docs/points",
        {"ids": [7, 8, UUID], "with_payload": False, "with_vector": False},
    )


async def test_missing_scrolls_a_payload_filter_asking_again_only_for_ids_not_seen() -> None:
    chunks = [
        {"id": 1, "payload": {"doc_id": "guide-1"}},
        {"id": 2, "payload": {"doc_id": "guide-1"}},
    ]
    first = {"result": {"points": chunks, "next_page_offset": 3}}
    last = {"result": {"points": [{"id": 9, "payload": {"doc_id": 42}}], "next_page_offset": None}}
    scroll = "/collections/docs/points/scroll"
    pages = {scroll: [httpx.Response(200, json=first), httpx.Response(200, json=last)]}
    target, client, seen = _looking_up(pages, id="payload.doc_id")
    async with client:
        got = await target.missing(["guide-1", "42", "gone"])
    assert got == {"gone"}
    # A payload id may be stored as a keyword or an integer; the second page asks only for
    # the ids the first did not show.
    asked = [body for method, _, body in seen if method == "POST"]
    assert [[c["match"]["any"] for c in body["filter"]["should"]] for body in asked] == [
        [["42", "gone", "guide-1"], [42]],
        [["42", "gone"], [42]],
    ]
    assert asked[1] | {"filter": None} == {
        "filter": None,
        "limit": 1000,
        "with_payload": ["doc_id"],
        "with_vector": False,
    }


async def test_missing_cannot_tell_when_qdrant_fails_and_keeps_the_canary_shown() -> None:
    posts = {
        "/collections/docs/points/query": [httpx.Response(200, json=POINTS)],
        "/collections/docs/points": [httpx.Response(500, text="boom")],
    }
    target, client, _ = _looking_up(posts)
    async with client:
        await target.search("q", 5, VECTOR)
        shown = target.describe_last_request()
        assert await target.missing(["7"]) is None
    assert target.describe_last_request() == shown
    assert "/points/query" in shown


async def test_an_id_read_from_elsewhere_in_the_point_cannot_be_looked_up() -> None:
    target, client, seen = _looking_up({}, id="version")
    async with client:
        assert await target.missing(["7"]) is None
    assert seen == []


async def test_the_index_state_is_the_exact_count_and_the_hnsw_settings() -> None:
    """For the run's fingerprint: ``points/count`` with ``exact``, and the info's HNSW config."""
    info = _info({"size": 3, "distance": "Cosine"})
    info["result"]["config"]["hnsw_config"] = {"m": 16, "ef_construct": 100, "on_disk": False}
    counted = httpx.Response(200, json={"result": {"count": 2970}, "status": "ok"})
    target, client, seen = _target(httpx.Response(200, json=info), counted)
    async with client:
        state = await target.index_state()
    assert state.documents == 2970
    assert state.settings == {"hnsw.ef_construct": 100, "hnsw.m": 16, "hnsw.on_disk": False}
    assert ("POST", "/collections/docs/points/count", {"exact": True}) in seen
    assert target.last_request is None  # the canary's request stays the one shown


async def test_a_count_that_is_not_one_raises_for_the_caller_to_log() -> None:
    info = httpx.Response(200, json=_info({"size": 3, "distance": "Cosine"}))
    target, client, _ = _target(info, httpx.Response(200, json={"result": {"count": "many"}}))
    async with client:
        with pytest.raises(QueryFailed, match="not a number"):
            await target.index_state()
