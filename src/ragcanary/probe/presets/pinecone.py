"""Pinecone's data plane: ``/query`` with the canary's vector, or integrated-inference search.

``url`` is the index host. With an embedding the vector goes to ``POST /query`` (hits are
``matches[]``); without one the index embeds the text itself (``POST /records/namespaces/
{namespace}/search``, hits ``result.hits[]``), which this preset reads into the same shape:
``{id, score, metadata}``. ``collection:`` is the namespace (the default one when unset).
Scores are similarities for cosine and dotproduct indexes; say ``score_order: asc`` for a
euclidean one. For the diagnosis, an id's exact score is computed from its fetched values by
the index's metric (``describe_index_stats``, asked once; ``vectors.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets.lookup import BATCH, missing_in_batches
from ragcanary.probe.presets.vectors import Metric, best_scores, cosine, dot, squared_l2
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

API_VERSION = "2025-04"
# An index's metric as /query scores it: euclidean is the squared distance.
METRICS = {
    "cosine": Metric(cosine),
    "dotproduct": Metric(dot),
    "euclidean": Metric(squared_l2, lower_is_better=True),
}


class PineconeTarget(HttpTarget):
    """One Pinecone index (and namespace); ``id:`` reads ``id`` or ``metadata.<field>``."""

    SHAPE: ClassVar[Mapping[str, Any]] = {"method": "POST", "results": "hits", "score": "score"}

    def _setup(self, config: TargetConfig) -> None:
        if "x-pinecone-api-version" not in self._headers:
            self._headers["X-Pinecone-API-Version"] = API_VERSION
        self._results = _hits
        self._base = config.url.rstrip("/")
        self._namespace = config.collection or ""
        self._field = config.id.removeprefix("metadata.") if config.id != "id" else None
        self._metric: str | None = None  # the index's, once describe_index_stats said it

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        body: dict[str, Any]
        if vector is not None:
            url = f"{self._base}/query"
            body = {
                "vector": list(vector),
                "topK": k,
                "namespace": self._namespace,
                "includeMetadata": self._field is not None,
                "includeValues": False,
            }
        else:
            namespace = quote(self._namespace or "__default__", safe="")
            url = f"{self._base}/records/namespaces/{namespace}/search"
            body = {"query": {"inputs": {"text": query}, "top_k": k}}
            if self._field is not None:
                body["fields"] = [self._field]
        return self._client.build_request(
            "POST",
            url,
            json=body,
            headers=self._headers,
        )

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``GET /vectors/fetch?ids=...`` of the namespace; ids in metadata cannot be fetched."""
        if self._field is not None:
            return None  # fetch_by_metadata is a preview API of later versions than ours
        # Fetch takes no id with a space, and no record has one.
        return await missing_in_batches([i for i in ids if " " not in i], self._held)

    async def _held(self, batch: list[str]) -> set[str]:
        """Which of ``batch`` the namespace holds (fetch answers only those)."""
        return set(await self._fetch(batch))

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """The fetched records' values, scored by the index's metric as ``/query`` scores
        (``METRICS``); the metric is read once from ``describe_index_stats``."""
        if self._field is not None:
            return None
        metric = METRICS.get(await self._index_metric())
        if metric is None:
            return None
        records: list[tuple[str, object]] = []
        asked = [i for i in ids if " " not in i]
        for start in range(0, len(asked), BATCH):
            fetched = await self._fetch(asked[start : start + BATCH])
            records += ((doc, _values(record)) for doc, record in fetched.items())
        return best_scores(records, vector, metric)

    async def _index_metric(self) -> str:
        """The index's metric (``cosine``, ``dotproduct``, ``euclidean``), asked once."""
        if self._metric is None:
            request = self._client.build_request(
                "POST", f"{self._base}/describe_index_stats", json={}, headers=self._headers
            )
            _, got = await self._ask(request)
            metric = got.get("metric") if isinstance(got, dict) else None
            if not isinstance(metric, str):
                raise QueryFailed("bad_response", "describe_index_stats answered no metric")
            self._metric = metric
        return self._metric

    async def _fetch(self, batch: list[str]) -> dict[str, Any]:
        """The records of ``batch`` the namespace holds, by id (fetch answers only those)."""
        params: dict[str, str | list[str]] = {"ids": batch}
        if self._namespace:
            params["namespace"] = self._namespace
        request = self._client.build_request(
            "GET",
            f"{self._base}/vectors/fetch",
            params=params,
            headers=self._headers,
        )
        _, got = await self._ask(request)
        vectors = got.get("vectors") if isinstance(got, dict) else None
        if not isinstance(vectors, dict):
            raise QueryFailed("bad_response", "pinecone's fetch answered without vectors")
        return {str(doc_id): record for doc_id, record in vectors.items()}


def _values(record: Any) -> object:
    """A fetched record's dense values."""
    return record.get("values") if isinstance(record, dict) else None


def _hits(document: Any) -> list[dict[str, Any]]:
    """``matches[]`` of a vector query or ``result.hits[]`` of a text search, as one shape."""
    if not isinstance(document, dict):
        raise QueryFailed("bad_response", "pinecone answered something other than an object")
    matches = document.get("matches")
    if isinstance(matches, list):
        return matches
    result = document.get("result")
    hits = result.get("hits") if isinstance(result, dict) else None
    if not isinstance(hits, list):
        raise QueryFailed("bad_response", "pinecone answered neither matches nor result.hits")
    return [
        {"id": h.get("_id"), "score": h.get("_score"), "metadata": h.get("fields")}
        if isinstance(h, dict)
        else h
        for h in hits
    ]
