"""The weaviate preset on Weaviate's documented GraphQL requests and answers (no server here)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target

pytestmark = pytest.mark.anyio
VECTOR = [0.5, -0.25, 0.125]
FIELDS = "_additional { id distance score }"
UUID_1 = "8d2f9a1e-2b4c-4f6e-9a0b-1c2d3e4f5a6b"
UUID_2 = "0f1e2d3c-4b5a-4968-8776-655443322110"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _objects(*hits: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"Get": {"Article": list(hits)}}}


def _config(**fields: Any) -> TargetConfig:
    given = {"preset": "weaviate", "url": "http://weaviate.test:8080/", "collection": "Article"}
    return TargetConfig(**(given | {"retries": 0} | fields))


def _target(answers: dict[str, httpx.Response], **fields: Any) -> tuple[Any, Any, list[Any]]:
    """A target whose server answers ``answers[path]``; ``seen`` holds (method, path, body)."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        assert request.headers["authorization"] == "Bearer wv-key"
        return answers[request.url.path]

    config = _config(headers={"Authorization": "Bearer wv-key"}, **fields)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("wv", config, client), client, seen


def _offline(**fields: Any) -> Any:
    """A target only asked to build queries (a client that sends nothing is cheap to make)."""
    unused = httpx.MockTransport(lambda request: httpx.Response(500))
    return make_target("wv", _config(**fields), httpx.AsyncClient(transport=unused))


async def test_near_vector_reads_distances_lowest_first() -> None:
    answer = _objects(
        {"_additional": {"id": UUID_1, "distance": 0.12, "score": None}},
        {"_additional": {"id": UUID_2, "distance": 0.31, "score": None}},
    )
    target, client, seen = _target({"/v1/graphql": httpx.Response(200, json=answer)}, embedding="m")
    async with client:
        got = await target.search("reset my password", 3, VECTOR)
    assert (got.outcome, got.ids, got.scores) == ("ok", (UUID_1, UUID_2), (0.12, 0.31))
    assert seen == [
        (
            "POST",
            "/v1/graphql",
            {
                "query": "{ Get { Article(limit: 3, nearVector: {vector: [0.5, -0.25, 0.125]}) "
                f"{{ {FIELDS} }} }} }}"
            },
        )
    ]
    assert _config(embedding="m").score_order == "asc"


async def test_bm25_reads_the_score_string_and_a_property_as_the_id() -> None:
    answer = _objects(
        {
            "doc_id": "guide-1",
            "_additional": {"id": UUID_1, "distance": None, "score": "3.4985464"},
        },
        {"doc_id": "guide-2", "_additional": {"id": UUID_2, "distance": None, "score": "1.25"}},
    )
    target, client, seen = _target(
        {"/v1/graphql": httpx.Response(200, json=answer)},
        search="bm25",
        id="doc_id",
        text_field="content",
    )
    async with client:
        got = await target.search('say "hi" \\ }) { Secret }\n', 2)
    assert (got.ids, got.scores) == (("guide-1", "guide-2"), (3.4985464, 1.25))
    assert seen[0][2] == {
        "query": "{ Get { Article(limit: 2, bm25: "
        '{query: "say \\"hi\\" \\\\ }) { Secret }\\n", properties: ["content"]}) '
        f"{{ doc_id {FIELDS} }} }} }}"
    }
    assert _config(search="bm25").score_order == "desc"


async def test_hybrid_sends_the_vector_and_named_vector_and_near_text_only_the_text() -> None:
    answer = _objects({"meta": {"doc_id": "g-1"}, "_additional": {"id": UUID_1, "score": "0.9"}})
    target, client, seen = _target(
        {"/v1/graphql": httpx.Response(200, json=answer)},
        search="hybrid",
        embedding="m",
        using="text",
        id="meta.doc_id",
    )
    async with client:
        got = await target.search("q", 5, VECTOR)
    assert (got.ids, got.scores) == (("g-1",), (0.9,))
    assert seen[0][2]["query"] == (
        '{ Get { Article(limit: 5, hybrid: {query: "q", vector: [0.5, -0.25, 0.125], '
        f'targetVectors: ["text"]}}) {{ meta {{ doc_id }} {FIELDS} }} }} }}'
    )
    assert _offline(search="nearText").graphql("q", 4, None) == (
        f'{{ Get {{ Article(limit: 4, nearText: {{concepts: ["q"]}}) {{ {FIELDS} }} }} }}'
    )


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_no_canary_text_escapes_its_graphql_string(text: str) -> None:
    """Whatever the canary says, GraphQL reads it back as the one bm25 query string."""
    graphql = pytest.importorskip("graphql")
    document = graphql.parse(_offline(search="bm25").graphql(text, 3, None))
    (get,) = document.definitions[0].selection_set.selections
    (article,) = get.selection_set.selections
    arguments = {a.name.value: a.value for a in article.arguments}
    (query,) = arguments["bm25"].fields
    assert (query.name.value, query.value.value) == ("query", text)


async def test_an_unknown_class_names_the_classes_there_are() -> None:
    error = {
        "data": {"Get": None},
        "errors": [
            {
                "locations": [{"column": 9, "line": 1}],
                "message": 'Cannot query field "Article" on type "GetObjectsObj".',
                "path": None,
            }
        ],
    }
    schema = {"classes": [{"class": "Paragraph"}, {"class": "Handbook"}]}
    target, client, seen = _target(
        {
            "/v1/graphql": httpx.Response(200, json=error),
            "/v1/schema": httpx.Response(200, json=schema),
        },
        embedding="m",
    )
    async with client:
        got = await target.search("q", 3, VECTOR)
    assert got.outcome == "bad_response"
    assert got.error == "class 'Article' not found; set collection: to one of Handbook, Paragraph"
    assert [(method, path) for method, path, _ in seen] == [
        ("POST", "/v1/graphql"),
        ("GET", "/v1/schema"),
    ]
    assert target.last_request[1] == "http://weaviate.test:8080/v1/graphql"  # what live shows


@pytest.mark.parametrize(
    ("message", "says"),
    [
        pytest.param(
            'Cannot query field "doc_id" on type "Article".',
            "set id: to one of its properties, or remove id: for the object's UUID",
            id="unknown-id-property",
        ),
        pytest.param(
            'Unknown argument "nearText" on field "Article" of type "GetObjectsObj".',
            "the class has no text vectorizer: use search: bm25 or hybrid, or embedding:",
            id="near-text-without-vectorizer",
        ),
        pytest.param(
            "explorer: get class: vector search: object vector search at index article: "
            "shard article_x: vector lengths don't match: 384 vs 768",
            "weaviate error: explorer: get class: vector search: object vector search at index "
            "article: shard article_x: vector lengths don't match: 384 vs 768",
            id="dimension",
        ),
    ],
)
async def test_graphql_errors_in_a_200_are_failures_that_say_the_fix(
    message: str, says: str
) -> None:
    error = {"data": {"Get": {"Article": None}}, "errors": [{"message": message}]}
    target, client, _ = _target({"/v1/graphql": httpx.Response(200, json=error)}, search="nearText")
    async with client:
        got = await target.search("q", 3)
    assert got.outcome == "bad_response"
    assert says in (got.error or "")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        pytest.param(
            httpx.Response(
                401,
                json={
                    "code": 401,
                    "message": "anonymous access not enabled, please provide an auth scheme "
                    "such as OIDC",
                },
            ),
            "HTTP 401 Unauthorized: anonymous access not enabled, please provide an auth scheme "
            'such as OIDC; Weaviate takes an API key as headers: {Authorization: "Bearer '
            '${WEAVIATE_API_KEY}"}',
            id="401",
        ),
        pytest.param(
            httpx.Response(403, json={"error": [{"message": "forbidden: read_data on Article"}]}),
            "HTTP 403 Forbidden: forbidden: read_data on Article; Weaviate takes an API key",
            id="403",
        ),
    ],
)
async def test_a_refused_key_names_the_header(answer: httpx.Response, says: str) -> None:
    target, client, _ = _target({"/v1/graphql": answer}, search="bm25")
    async with client:
        got = await target.search("q", 3)
    assert got.outcome == "http_4xx"
    assert says in (got.error or "")
    assert "wv-key" not in (got.error or "")


async def test_a_vector_search_without_the_vector_is_not_sent() -> None:
    target, client, seen = _target({}, embedding="m")
    async with client:
        got = await target.search("q", 3)
    assert (got.outcome, seen) == ("bad_response", [])


async def test_validate_live_shows_the_graphql_query_with_its_vector_cut_short() -> None:
    answer = _objects({"_additional": {"id": UUID_1, "distance": 0.1}})
    target, client, _ = _target({"/v1/graphql": httpx.Response(200, json=answer)}, embedding="m")
    async with client:
        await target.search("q", 2, [0.25] * 384)
    assert target.describe_last_request() == (
        'POST http://weaviate.test:8080/v1/graphql {"query": "{ Get { Article(limit: 2, '
        "nearVector: {vector: [0.25, 0.25, 0.25, ... 384 numbers]}) "
        f'{{ {FIELDS} }} }} }}"}}'
    )


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        pytest.param(
            httpx.Response(200, json={"classes": []}),
            "class 'Article' not found, where there are no classes",
            id="no-classes",
        ),
        pytest.param(
            httpx.Response(403, json={"error": [{"message": "forbidden"}]}),
            "class 'Article' not found; check collection:",
            id="schema-unreadable",
        ),
    ],
)
async def test_an_unknown_class_without_a_list_of_classes(
    schema: httpx.Response, says: str
) -> None:
    error = {"errors": [{"message": 'Cannot query field "Article" on type "GetObjectsObj".'}]}
    target, client, _ = _target(
        {"/v1/graphql": httpx.Response(200, json=error), "/v1/schema": schema}, search="bm25"
    )
    async with client:
        got = await target.search("q", 3)
    assert got.error == says


async def test_missing_filters_on_the_object_id_with_contains_any() -> None:
    answer = _objects({"_additional": {"id": UUID_1, "distance": None, "score": None}})
    target, client, seen = _target(
        {"/v1/graphql": httpx.Response(200, json=answer)}, embedding="minilm"
    )
    async with client:
        got = await target.missing([UUID_1, UUID_2, "not-a-uuid"])
    assert got == {UUID_2, "not-a-uuid"}  # an object id is a UUID: any other cannot be one
    assert seen[0][2]["query"] == (
        f'{{ Get {{ Article(limit: 2, where: {{path: ["id"], operator: ContainsAny, '
        f'valueText: ["{UUID_1}", "{UUID_2}"]}}) {{ _additional {{ id }} }} }} }}'
    )


async def test_missing_filters_on_a_property_id_and_reads_its_values() -> None:
    answer = _objects(
        {"doc_id": "guide-1", "_additional": {"id": UUID_1}},
        {"doc_id": "guide-1", "_additional": {"id": UUID_2}},
    )
    target, client, seen = _target(
        {"/v1/graphql": httpx.Response(200, json=answer)}, embedding="minilm", id="doc_id"
    )
    async with client:
        got = await target.missing(["guide-1", 'say "hi"'])
    assert got == {'say "hi"'}
    assert seen[0][2]["query"] == (
        '{ Get { Article(limit: 1000, where: {path: ["doc_id"], operator: ContainsAny, '
        'valueText: ["guide-1", "say \\"hi\\""]}) { doc_id _additional { id } } } }'
    )


async def test_missing_cannot_tell_of_a_graphql_error_or_a_nested_property() -> None:
    error = {"errors": [{"message": 'Cannot query field "doc_id" on type "Article".'}]}
    target, client, _ = _target(
        {"/v1/graphql": httpx.Response(200, json=error)}, embedding="minilm", id="doc_id"
    )
    async with client:
        assert await target.missing(["guide-1"]) is None
    target, client, seen = _target({}, embedding="minilm", id="meta.doc_id")
    async with client:
        assert await target.missing(["guide-1"]) is None
    assert seen == []
