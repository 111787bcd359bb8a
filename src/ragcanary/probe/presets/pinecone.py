"""Pinecone's data plane: ``/query`` with the canary's vector, or integrated-inference search.

``url`` is the index host. With an embedding the vector goes to ``POST /query`` (hits are
``matches[]``); without one the index embeds the text itself (``POST /records/namespaces/
{namespace}/search``, hits ``result.hits[]``), which this preset reads into the same shape:
``{id, score, metadata}``. ``collection:`` is the namespace (the default one when unset).
Scores are similarities for cosine and dotproduct indexes; say ``score_order: asc`` for a
euclidean one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets.lookup import missing_in_batches
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

API_VERSION = "2025-04"


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
        return {str(doc_id) for doc_id in vectors}


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
