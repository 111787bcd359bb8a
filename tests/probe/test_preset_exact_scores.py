"""Exact scores for the diagnosis on the presets that need no server here: the exact search or
the stored vectors each asks for, the score it reads or computes as its search would report
it, the best chunk of an id, and "cannot tell" (None) for what it cannot know or a failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target
from ragcanary.probe.presets.lookup import PAGE

pytestmark = pytest.mark.anyio
QUERY = [1.0, 0.0]
NEAR = [0.6, 0.8]  # cosine 0.6, dot 0.6, squared L2 0.8, Manhattan 1.2 from QUERY
FAR = [0.0, 1.0]  # cosine 0, dot 0, squared L2 2, Manhattan 2
UUID = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"

Route = Callable[[Any], Any]  # a request's JSON body (None for a GET) -> the answer's JSON


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _server(routes: dict[str, Route], **fields: Any) -> tuple[Any, list[Any]]:
    """A target whose server answers ``METHOD path`` with ``routes[...]`` of the request's
    body (500 for a route it lacks); and the (route, query string, body) of each request."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        route = f"{request.method} {request.url.path}"
        seen.append((route, request.url.query.decode(), body))
        if route not in routes:
            return httpx.Response(500, json={"error": "boom"})
        return httpx.Response(200, json=routes[route](body))

    config = TargetConfig(**({"retries": 0, "embedding": "m"} | fields))
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return make_target("t", config, client), seen


def _bodies(seen: list[Any], route: str) -> list[Any]:
    return [body for sent, _, body in seen if sent == route]


# qdrant: the same query, restricted to the ids, with params.exact


def _qdrant(query: Route, **fields: Any) -> tuple[Any, list[Any]]:
    vectors = {"dense": {"size": 2, "distance": "Cosine"}}
    info = {"result": {"config": {"params": {"vectors": vectors}}}}
    routes = {"GET /collections/docs": lambda _: info, "POST /collections/docs/points/query": query}
    given = {
        "preset": "qdrant",
        "url": "http://qdrant.test",
        "collection": "docs",
        "using": "dense",
    }
    return _server(routes, **(given | fields))


async def test_qdrant_scores_point_ids_with_an_exact_search_restricted_to_them() -> None:
    answer = {"result": {"points": [{"id": 7, "score": 0.91}]}}
    target, seen = _qdrant(lambda _: answer)
    assert await target.scores(["7", UUID, "guide-1"], QUERY) == {"7": 0.91}
    # guide-1 can be no point id (an unsigned integer or a UUID): it is not asked about.
    assert _bodies(seen, "POST /collections/docs/points/query") == [
        {
            "query": QUERY,
            "filter": {"must": [{"has_id": [UUID, 7]}]},  # asked in sorted order
            "params": {"exact": True},
            "limit": PAGE,
            "with_payload": False,
            "using": "dense",
        }
    ]


async def test_qdrant_takes_a_payload_ids_best_chunk_and_asks_again_for_ids_not_seen() -> None:
    chunks = [{"id": n, "score": 0.9 - n / 1e4, "payload": {"doc_id": "g-1"}} for n in range(PAGE)]
    pages = [chunks, [{"id": 5000, "score": 0.5, "payload": {"doc_id": 42}}]]
    target, seen = _qdrant(lambda _: {"result": {"points": pages.pop(0)}}, id="payload.doc_id")
    assert await target.scores(["g-1", "42", "gone"], QUERY) == {"g-1": 0.9, "42": 0.5}
    asked = _bodies(seen, "POST /collections/docs/points/query")
    assert [[c["match"]["any"] for c in body["filter"]["should"]] for body in asked] == [
        [["42", "g-1", "gone"], [42]],
        [["42", "gone"], [42]],  # the full page showed only g-1's chunks
    ]
    assert asked[0]["with_payload"] == ["doc_id"]


# elasticsearch and opensearch: a script_score whose script is the kNN _score


def _engine(
    preset: str, spec: dict[str, Any], hits: list[Any], failed_shards: int = 0, **fields: Any
) -> Any:
    mapping = {"docs": {"mappings": {"emb": {"full_name": "emb", "mapping": {"emb": spec}}}}}
    answer = {"_shards": {"total": 2, "failed": failed_shards}, "hits": {"hits": hits}}
    routes = {
        "GET /docs/_mapping/field/emb": lambda _: mapping,
        "POST /docs/_search": lambda _: answer,
    }
    given = {"preset": preset, "url": "http://es.test:9200", "collection": "docs"}
    return _server(routes, **(given | {"vector_field": "emb"} | fields))


@pytest.mark.parametrize(
    ("similarity", "source"),
    [
        ("cosine", "(1.0 + cosineSimilarity(params.query_vector, 'emb')) / 2.0"),
        ("dot_product", "(1.0 + dotProduct(params.query_vector, 'emb')) / 2.0"),
        ("l2_norm", "double d = l2norm(params.query_vector, 'emb'); return 1.0 / (1.0 + d * d);"),
        (
            "max_inner_product",
            "double d = dotProduct(params.query_vector, 'emb'); "
            "return d < 0 ? 1.0 / (1.0 - d) : d + 1.0;",
        ),
    ],
)
async def test_elasticsearch_scores_ids_as_the_fields_similarity_scores_a_knn_hit(
    similarity: str, source: str
) -> None:
    spec = {"type": "dense_vector", "dims": 2, "similarity": similarity, "element_type": "float"}
    target, seen = _engine("elasticsearch", spec, [{"_id": "a1", "_score": 0.8}])
    assert await target.scores(["a1", "gone"], QUERY) == {"a1": 0.8}
    assert seen[0][:2] == ("GET /docs/_mapping/field/emb", "include_defaults=true")
    assert _bodies(seen, "POST /docs/_search") == [
        {
            "size": PAGE,
            "_source": False,
            "track_total_hits": False,
            "query": {
                "script_score": {
                    "query": {
                        "bool": {
                            "filter": [
                                {"ids": {"values": ["a1", "gone"]}},
                                {"exists": {"field": "emb"}},
                            ]
                        }
                    },
                    "script": {"source": source, "params": {"query_vector": QUERY}},
                }
            },
        }
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"type": "knn_vector", "space_type": "l2"}, 0.8),  # knn_score is l2's kNN _score
        ({"type": "knn_vector", "method": {"space_type": "innerproduct", "engine": "faiss"}}, 0.8),
        # knn_score is 1 + cos; the Lucene engine's kNN search scores (1 + cos) / 2
        ({"type": "knn_vector", "method": {"space_type": "cosinesimil", "engine": "lucene"}}, 0.4),
    ],
)
async def test_opensearch_scores_with_knn_score_on_the_kNN_searchs_scale(
    spec: dict[str, Any], expected: float
) -> None:
    target, seen = _engine("opensearch", spec, [{"_id": "a1", "_score": 0.8}])
    assert await target.scores(["a1"], QUERY) == {"a1": expected}
    (body,) = _bodies(seen, "POST /docs/_search")
    method = spec.get("method", {})
    space = spec.get("space_type") or method["space_type"]
    assert body["query"]["script_score"]["script"] == {
        "source": "knn_score",
        "lang": "knn",
        "params": {"field": "emb", "query_value": QUERY, "space_type": space},
    }


@pytest.mark.parametrize(
    ("preset", "spec"),
    [
        ("elasticsearch", {"type": "dense_vector", "similarity": "cosine", "element_type": "byte"}),
        ("elasticsearch", {"type": "dense_vector", "similarity": "bm25"}),
        # nmslib's and faiss's cosinesimil scale changed between versions; no space: a default
        ("opensearch", {"type": "knn_vector", "method": {"space_type": "cosinesimil"}}),
        ("opensearch", {"type": "knn_vector", "dimension": 2}),
        ("opensearch", {"type": "knn_vector", "model_id": "my-model"}),
    ],
)
async def test_a_search_engine_field_whose_knn_score_is_unknown_cannot_tell(
    preset: str, spec: dict[str, Any]
) -> None:
    target, seen = _engine(preset, spec, [{"_id": "a1", "_score": 0.8}])
    assert await target.scores(["a1"], QUERY) is None
    assert _bodies(seen, "POST /docs/_search") == []


async def test_a_source_id_gets_its_best_chunks_score_from_a_terms_query() -> None:
    keyword = {"type": "keyword"}
    dense = {"type": "dense_vector", "similarity": "cosine", "element_type": "float"}
    hits = [
        {"_id": "c2", "_score": 0.9, "_source": {"doc_id": "g-1"}},
        {"_id": "c1", "_score": 0.7, "_source": {"doc_id": "g-1"}},
        {"_id": "c3", "_score": 0.6, "_source": {"doc_id": "g-2"}},
    ]

    def mapping(field: str, spec: dict[str, Any]) -> Route:
        found = {"full_name": field, "mapping": {field: spec}}
        return lambda _: {"docs": {"mappings": {field: found}}}

    routes = {
        "GET /docs/_mapping/field/doc_id": mapping("doc_id", keyword),
        "GET /docs/_mapping/field/emb": mapping("emb", dense),
        "POST /docs/_search": lambda _: {"hits": {"hits": hits}},
    }
    target, seen = _server(
        routes,
        preset="elasticsearch",
        url="http://es.test:9200",
        collection="docs",
        vector_field="emb",
        id="_source.doc_id",
    )
    assert await target.scores(["g-1", "g-2"], QUERY) == {"g-1": 0.9, "g-2": 0.6}
    (body,) = _bodies(seen, "POST /docs/_search")
    assert body["query"]["script_score"]["query"]["bool"]["filter"][0] == {
        "terms": {"doc_id": ["g-1", "g-2"]}
    }


async def test_a_bm25_search_or_a_failed_shard_cannot_tell() -> None:
    target, seen = _server(
        {},
        preset="opensearch",
        url="http://es.test",
        collection="docs",
        text_field="body",
        embedding=None,
    )
    assert await target.scores(["a1"], QUERY) is None
    assert seen == []
    dense = {"type": "dense_vector", "similarity": "cosine"}
    hits = [{"_id": "a1", "_score": 0.8}]
    target, seen = _engine("elasticsearch", dense, hits, failed_shards=1)
    assert await target.scores(["a1"], QUERY) is None
    assert len(_bodies(seen, "POST /docs/_search")) == 1  # answered, but not by every shard


# milvus: the entities' vectors, scored by the metric of the field's index


def _milvus(metric: str, rows: list[dict[str, Any]], **fields: Any) -> tuple[Any, list[Any]]:
    described = {
        "code": 0,
        "data": {
            "fields": [
                {"name": "pk", "type": "Int64", "primaryKey": True},
                {"name": "doc_id", "type": "VarChar(64)"},
                {"name": "dense", "type": "FloatVector", "params": [{"key": "dim", "value": "2"}]},
            ],
            "indexes": [{"fieldName": "dense", "indexName": "dense", "metricType": metric}],
        },
    }
    routes = {
        "POST /v2/vectordb/collections/describe": lambda _: described,
        "POST /v2/vectordb/entities/query": lambda _: {"code": 0, "data": rows},
    }
    given = {"preset": "milvus", "url": "http://milvus.test:19530", "collection": "docs"}
    return _server(routes, **(given | {"id": "doc_id"} | fields))


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("COSINE", 0.6), ("IP", 0.6), ("L2", 0.8)],  # the best chunk: highest, or nearest for L2
)
async def test_milvus_computes_a_documents_best_chunk_by_its_index_metric(
    metric: str, expected: float
) -> None:
    rows = [
        {"pk": 1, "doc_id": "g-1", "dense": FAR},
        {"pk": 2, "doc_id": "g-1", "dense": NEAR},
    ]
    target, seen = _milvus(metric, rows)
    got = await target.scores(["g-1", "gone"], QUERY)
    assert got == pytest.approx({"g-1": expected})
    assert _bodies(seen, "POST /v2/vectordb/entities/query") == [
        {
            "collectionName": "docs",
            "filter": 'doc_id in ["g-1", "gone"]',
            "outputFields": ["doc_id", "dense"],
            "limit": PAGE,
            "offset": 0,
        }
    ]


async def test_milvus_cannot_tell_of_a_metric_it_does_not_know_or_another_vector_field() -> None:
    target, seen = _milvus("HAMMING", [])
    assert await target.scores(["g-1"], QUERY) is None
    target, seen = _milvus("COSINE", [], vector_field="sparse")
    assert await target.scores(["g-1"], QUERY) is None
    assert _bodies(seen, "POST /v2/vectordb/entities/query") == []


# pinecone: the fetched values, scored by the index's metric from describe_index_stats


def _pinecone(stats: dict[str, Any], records: dict[str, Any], **fields: Any) -> Any:
    routes = {
        "POST /describe_index_stats": lambda _: stats,
        "GET /vectors/fetch": lambda _: {"vectors": records, "namespace": "prod"},
    }
    given = {"preset": "pinecone", "url": "https://idx.pinecone.test", "collection": "prod"}
    return _server(routes, **(given | fields))


@pytest.mark.parametrize(
    ("metric", "expected"), [("cosine", 0.6), ("dotproduct", 0.6), ("euclidean", 0.8)]
)
async def test_pinecone_scores_fetched_values_by_the_index_metric_asked_once(
    metric: str, expected: float
) -> None:
    stats = {"dimension": 2, "metric": metric, "vectorType": "dense", "namespaces": {}}
    target, seen = _pinecone(stats, {"v-1": {"id": "v-1", "values": NEAR}})
    assert await target.scores(["v-1", "gone"], QUERY) == pytest.approx({"v-1": expected})
    assert await target.scores(["v-1"], QUERY) == pytest.approx({"v-1": expected})
    routes = [route for route, _, _ in seen]
    assert routes.count("POST /describe_index_stats") == 1
    assert seen[1][1] == "ids=v-1&ids=gone&namespace=prod"


async def test_pinecone_cannot_tell_without_a_metric_or_for_a_metadata_id() -> None:
    target, seen = _pinecone({"dimension": 2}, {"v-1": {"values": NEAR}})
    assert await target.scores(["v-1"], QUERY) is None
    assert [route for route, _, _ in seen] == ["POST /describe_index_stats"]
    target, seen = _pinecone({"metric": "cosine"}, {}, id="metadata.doc_id")
    assert await target.scores(["g-1"], QUERY) is None
    assert seen == []


# weaviate: the objects' vectors, scored by the class's distance as nearVector reports it


def _weaviate(schema: dict[str, Any], objects: list[Any], **fields: Any) -> Any:
    routes = {
        "GET /v1/schema/Article": lambda _: schema,
        "POST /v1/graphql": lambda _: {"data": {"Get": {"Article": objects}}},
    }
    given = {"preset": "weaviate", "url": "http://weaviate.test:8080", "collection": "Article"}
    return _server(routes, **(given | fields))


@pytest.mark.parametrize(
    ("distance", "expected"),
    [("cosine", 0.4), ("dot", -0.6), ("l2-squared", 0.8), ("manhattan", 1.2)],
)
async def test_weaviate_scores_an_objects_vector_by_the_class_distance(
    distance: str, expected: float
) -> None:
    schema = {"class": "Article", "vectorIndexConfig": {"distance": distance}}
    objects = [{"_additional": {"id": UUID, "vector": NEAR}}]
    target, seen = _weaviate(schema, objects)
    assert await target.scores([UUID, "not-a-uuid"], QUERY) == pytest.approx({UUID: expected})
    (body,) = _bodies(seen, "POST /v1/graphql")
    assert body["query"] == (
        '{ Get { Article(limit: 1000, where: {path: ["id"], operator: ContainsAny, '
        f'valueText: ["{UUID}"]}}) {{ _additional {{ id vector }} }} }} }}'
    )


async def test_weaviate_takes_a_propertys_nearest_chunk_of_a_named_vector() -> None:
    schema = {
        "class": "Article",
        "vectorConfig": {"body": {"vectorIndexConfig": {"distance": "l2-squared"}}},
    }
    objects = [
        {"doc_id": "g-1", "_additional": {"id": UUID, "vectors": {"body": FAR}}},
        {"doc_id": "g-1", "_additional": {"id": UUID, "vectors": {"body": NEAR}}},
        {"doc_id": "g-10", "_additional": {"id": UUID, "vectors": {"body": NEAR}}},
    ]
    target, seen = _weaviate(schema, objects, id="doc_id", using="body")
    assert await target.scores(["g-1"], QUERY) == pytest.approx({"g-1": 0.8})
    (body,) = _bodies(seen, "POST /v1/graphql")
    assert "doc_id _additional { id vectors { body } }" in body["query"]


async def test_weaviate_cannot_tell_for_another_operator_or_distance() -> None:
    target, seen = _weaviate({}, [], search="hybrid")
    assert await target.scores([UUID], QUERY) is None
    assert seen == []
    schema = {"class": "Article", "vectorIndexConfig": {"distance": "hamming"}}
    target, seen = _weaviate(schema, [])
    assert await target.scores([UUID], QUERY) is None
    assert _bodies(seen, "POST /v1/graphql") == []


# vespa: the same nearestNeighbor with approximate:false, restricted to a summary field's ids


def _vespa(children: list[Any], **fields: Any) -> Any:
    routes = {"POST /search/": lambda _: {"root": {"id": "toplevel", "children": children}}}
    given = {"preset": "vespa", "url": "https://app.vespa.test", "collection": "doc"}
    return _server(routes, **(given | {"vector_field": "embedding"} | fields))


async def test_vespa_ranks_a_fields_ids_exactly_with_the_same_rank_profile() -> None:
    children = [
        {"id": "id:d:doc::c2", "relevance": 0.9, "fields": {"doc_id": 'say "hi"'}},
        {"id": "id:d:doc::c1", "relevance": 0.7, "fields": {"doc_id": 'say "hi"'}},
        {"id": "id:d:doc::c3", "relevance": 0.5, "fields": {"doc_id": "g-2"}},
    ]
    target, seen = _vespa(children, id="fields.doc_id", rank_profile="semantic")
    got = await target.scores(['say "hi"', "g-2", "g-3"], QUERY)
    assert got == {'say "hi"': 0.9, "g-2": 0.5}
    assert _bodies(seen, "POST /search/") == [
        {
            "yql": "select * from sources doc where ({targetHits:400, approximate:false}"
            'nearestNeighbor(embedding, q)) and doc_id in ("g-2", "g-3", "say \\"hi\\"")',
            "input.query(q)": QUERY,
            "hits": 400,
            "ranking": "semantic",
        }
    ]


async def test_vespas_own_document_id_cannot_be_restricted_to() -> None:
    target, seen = _vespa([])
    assert await target.scores(["id:d:doc::c1"], QUERY) is None
    assert seen == []


# every preset: a request that fails is "cannot tell", never an error


@pytest.mark.parametrize(
    "fields",
    [
        {"preset": "qdrant", "url": "http://q.test", "collection": "docs"},
        {"preset": "elasticsearch", "url": "http://e.test", "collection": "d", "vector_field": "v"},
        {"preset": "opensearch", "url": "http://o.test", "collection": "d", "vector_field": "v"},
        {"preset": "milvus", "url": "http://m.test", "collection": "docs"},
        {"preset": "pinecone", "url": "https://p.test"},
        {"preset": "weaviate", "url": "http://w.test", "collection": "Article"},
        {
            "preset": "vespa",
            "url": "https://v.test",
            "vector_field": "e",
            "id": "fields.doc_id",
        },
    ],
    ids=lambda fields: fields["preset"],
)
async def test_a_failing_request_cannot_tell(fields: dict[str, Any]) -> None:
    target, seen = _server({}, **fields)
    assert await target.scores(["7", UUID], QUERY) is None
    assert seen  # it asked, and the server failed
