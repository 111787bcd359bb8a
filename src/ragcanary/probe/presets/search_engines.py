"""Elasticsearch and OpenSearch: ``POST /{index}/_search``, kNN with the vector or BM25 text.

Both answer ``hits.hits[]`` with ``_id`` and ``_score`` (higher is better, for kNN too:
the engines turn distances into similarities). ``id:`` reads a hit, so ``_id`` (the default
here) or ``_source.doc_id``; only that source field is asked for, never the documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.model import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.target import HttpTarget

# kNN candidates per shard: ten times k, as the engines' guides suggest, within their limit.
CANDIDATES_PER_K = 10
MAX_CANDIDATES = 10_000


class SearchEngineTarget(HttpTarget):
    """One index of Elasticsearch (``knn`` search option) or OpenSearch (``knn`` query)."""

    SHAPE: ClassVar[Mapping[str, Any]] = {
        "method": "POST",
        "results": "hits.hits",
        "score": "_score",
    }

    def _shape(self, config: TargetConfig) -> Mapping[str, Any]:
        # A hit's own id is _id here; an id: the config sets is kept.
        return {**self.SHAPE, "id": "_id" if config.id == "id" else config.id}

    def _setup(self, config: TargetConfig) -> None:
        id_path = self._config.id
        assert config.collection is not None  # the config model requires the index
        self._url = f"{config.url.rstrip('/')}/{quote(config.collection, safe='')}/_search"
        source = id_path.removeprefix("_source.")
        self._source: bool | list[str] = [source] if source != id_path else False

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The index's top ``k``: nearest to ``vector`` with an embedding, else BM25 on text."""
        if self._config.embedding is not None and vector is None:
            reason = f"the {self._config.preset} kNN search needs the query's vector"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        return self._client.build_request(
            "POST",
            self._url,
            json=self._body(query, k, vector),
            headers=self._headers,
            timeout=httpx.Timeout(self._config.timeout),
        )

    def _body(self, query: str, k: int, vector: Sequence[float] | None) -> dict[str, Any]:
        config = self._config
        body: dict[str, Any] = {"size": k, "_source": self._source}
        if vector is None:
            body["query"] = {"match": {config.text_field: query}}
        elif config.preset == "opensearch":
            body["query"] = {"knn": {config.vector_field: {"vector": list(vector), "k": k}}}
        else:
            candidates = max(k, min(k * CANDIDATES_PER_K, MAX_CANDIDATES))
            body["knn"] = {
                "field": config.vector_field,
                "query_vector": list(vector),
                "k": k,
                "num_candidates": candidates,
            }
        return body
