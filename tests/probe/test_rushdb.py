"""The rushdb preset on RushDB's documented AI search requests and answers (no server here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]
RECORDS = {
    "data": [
        {
            "__id": "0192f5b2-rec-1",
            "__label": "DOC_CHUNK",
            "__score": 0.921,
            "doc_id": "self-hosting",
            "text": "Run RushDB yourself with Docker",
        },
        {
            "__id": "0192f5b2-rec-2",
            "__label": "DOC_CHUNK",
            "__score": 0.887,
            "doc_id": "cloud",
            "text": "Sign up for RushDB Cloud",
        },
    ],
    "success": True,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _target(answers: dict[str, httpx.Response], **fields: Any) -> tuple[Any, Any, list[Any]]:
    """A target whose server answers ``answers[path]``; ``seen`` holds (method, path, body)."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        assert request.headers["authorization"] == "Bearer rdb-key"
        return answers[request.url.path]

    given = {
        "preset": "rushdb",
        "url": "https://api.rushdb.test",
        "collection": "DOC_CHUNK",
        "text_field": "text",
        "headers": {"Authorization": "Bearer rdb-key"},
        "retries": 0,
    }
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("rdb", TargetConfig(**(given | fields)), client), client, seen


async def test_rushdb_embeds_the_text_and_answers_records_by_similarity() -> None:
    target, client, seen = _target({"/api/v1/ai/search": httpx.Response(200, json=RECORDS)})
    async with client:
        got = await target.search("how to set up a self-hosted instance", 10)
    assert (got.outcome, got.ids, got.scores) == (
        "ok",
        ("0192f5b2-rec-1", "0192f5b2-rec-2"),
        (0.921, 0.887),
    )
    assert seen == [
        (
            "POST",
            "/api/v1/ai/search",
            {
                "propertyName": "text",
                "labels": ["DOC_CHUNK"],
                "query": "how to set up a self-hosted instance",
                "limit": 10,
            },
        )
    ]


async def test_with_an_embedding_the_vector_is_sent_and_ids_read_a_property() -> None:
    target, client, seen = _target(
        {"/api/v1/ai/search": httpx.Response(200, json=RECORDS)},
        url="https://api.rushdb.test/api/v1/",  # the base URL as RushDB's docs write it
        embedding="m",
        id="doc_id",
    )
    async with client:
        got = await target.search("q", 2, VECTOR)
    assert got.ids == ("self-hosting", "cloud")
    assert seen[0][1:] == (
        "/api/v1/ai/search",
        {"propertyName": "text", "labels": ["DOC_CHUNK"], "queryVector": VECTOR, "limit": 2},
    )


async def test_a_missing_index_names_the_indexed_labels_and_properties() -> None:
    missing = {
        "statusCode": 404,
        "message": 'No embedding index found for label "DOC_CHUNK" and property "text"',
        "error": "Not Found",
    }
    indexes = {
        "data": [
            {"id": "idx_1", "label": "Article", "propertyName": "body", "status": "ready"},
            {"id": "idx_2", "label": "DOC_CHUNK", "propertyName": "content", "status": "ready"},
        ],
        "success": True,
    }
    target, client, seen = _target(
        {
            "/api/v1/ai/search": httpx.Response(404, json=missing),
            "/api/v1/ai/indexes": httpx.Response(200, json=indexes),
        }
    )
    async with client:
        got = await target.search("q", 3)
    assert got.outcome == "http_4xx"
    assert got.error == (
        'HTTP 404 Not Found: No embedding index found for label "DOC_CHUNK" and property "text"; '
        "set collection: and text_field: to a label and property of one of Article.body, "
        "DOC_CHUNK.content"
    )
    assert [path for _, path, _ in seen] == ["/api/v1/ai/search", "/api/v1/ai/indexes"]
    assert target.last_request[1] == "https://api.rushdb.test/api/v1/ai/search"


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        pytest.param(
            httpx.Response(401, json={"statusCode": 401, "message": "Unauthorized"}),
            "HTTP 401 Unauthorized: Unauthorized; RushDB takes an API key as headers: "
            '{Authorization: "Bearer ${RUSHDB_API_KEY}"}',
            id="401",
        ),
        pytest.param(
            httpx.Response(
                422,
                json={
                    "statusCode": 422,
                    "message": 'Embedding index for "DOC_CHUNK:text" is not ready yet '
                    "(status: pending)",
                },
            ),
            'HTTP 422 Unprocessable Entity: Embedding index for "DOC_CHUNK:text" is not ready '
            "yet (status: pending)",
            id="index-not-ready",
        ),
        pytest.param(
            httpx.Response(200, json={"success": False, "message": "Project not found"}),
            "rushdb error: Project not found",
            id="success-false",
        ),
    ],
)
async def test_refusals_say_why(answer: httpx.Response, says: str) -> None:
    target, client, _ = _target({"/api/v1/ai/search": answer})
    async with client:
        got = await target.search("q", 3)
    assert got.error == says
