"""Milvus's REST API (v2): ``POST /v2/vectordb/entities/search`` with the canary's vector.

Milvus answers errors with HTTP 200 and a non-zero ``code``; those are failures here. A hit's
``distance`` is a similarity for COSINE and IP collections (the default ``score_order:
desc``) and a distance for L2 ones (say ``score_order: asc``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ragcanary.config.model import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.target import HttpTarget, QueryFailed


class MilvusTarget(HttpTarget):
    """One Milvus collection; ``id:`` reads a hit (``id``, or an output field by name)."""

    SHAPE: ClassVar[Mapping[str, Any]] = {"method": "POST", "results": "data", "score": "distance"}

    def _setup(self, config: TargetConfig) -> None:
        self._results = _hits
        self._url = f"{config.url.rstrip('/')}/v2/vectordb/entities/search"
        self._output = [] if config.id == "id" else [config.id.split(".")[0]]

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The collection's ``k`` nearest to ``vector``, best first."""
        if vector is None:
            reason = "the milvus preset queries by vector: set embedding:"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        config = self._config
        body: dict[str, Any] = {
            "collectionName": config.collection,
            "data": [list(vector or ())],
            "limit": k,
            "outputFields": self._output,
        }
        if config.vector_field is not None:
            body["annsField"] = config.vector_field
        if config.database != "default_database":
            body["dbName"] = config.database
        return self._client.build_request(
            "POST",
            self._url,
            json=body,
            headers=self._headers,
            timeout=httpx.Timeout(config.timeout),
        )


def _hits(document: Any) -> Any:
    """The hit list, or the error Milvus reported inside a 200 answer."""
    if not isinstance(document, dict):
        raise QueryFailed("bad_response", "milvus answered something other than an object")
    code = document.get("code", 0)
    if code != 0:
        message = str(document.get("message", ""))[:300]
        raise QueryFailed("bad_response", f"milvus error {code}: {message}")
    return document.get("data")
