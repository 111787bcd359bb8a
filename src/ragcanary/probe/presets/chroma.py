"""Chroma's REST API (v2): the collection by name, queried with the canary's vector.

Chroma answers column-wise (``ids: [[...]]``, ``distances: [[...]]``, ``metadatas: [[...]]``,
one inner list per query vector); the hits are those columns zipped, so that ``id:`` may
point into a hit's ``metadata`` (``metadata.doc_id``). Its scores are distances.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from ragcanary.config.model import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.target import HttpTarget, QueryFailed

# Names of existing collections a "not found" message lists at most.
SHOWN_COLLECTIONS = 20


class ChromaTarget(HttpTarget):
    """A Chroma collection; resolves its id once, and again after the collection went away."""

    def __init__(
        self,
        name: str,
        config: TargetConfig,
        client: httpx.AsyncClient,
        *,
        redact: Callable[[str], str] = lambda s: s,
    ) -> None:
        # The hit list is built here; HttpTarget reads each hit's id and distance from it.
        shaped = config.model_copy(
            update={"method": "POST", "results": "hits", "score": "distance"}
        )
        super().__init__(name, shaped, client, redact=redact)
        self._results = _hits
        assert config.collection is not None  # the config model requires it for this preset
        self._collection = config.collection
        self._collections_url = (
            f"{config.url.rstrip('/')}/api/v2/tenants/{quote(config.tenant, safe='')}"
            f"/databases/{quote(config.database, safe='')}/collections"
        )
        self._collection_id: str | None = None
        self._resolving = asyncio.Lock()

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The collection's ``k`` nearest to ``vector``, nearest first."""
        started = self._clock()
        if vector is None:
            reason = "the chroma preset queries by vector: set embedding: on the target"
            return Answer((), (), 0.0, "bad_response", reason)
        try:
            await self._resolve()
        except QueryFailed as failure:
            reason = self._redact(failure.reason)
            return Answer((), (), self._clock() - started, failure.outcome, reason)
        answer = await super().search(query, k, vector)
        if answer.outcome == "http_4xx":
            self._collection_id = None  # recreated under the same name: look it up again
        return answer

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        body = {
            "query_embeddings": [list(vector or ())],
            "n_results": k,
            "include": ["distances", "metadatas"],
        }
        return self._client.build_request(
            "POST",
            f"{self._collections_url}/{self._collection_id}/query",
            json=body,
            headers=self._headers,
            timeout=httpx.Timeout(self._config.timeout),
        )

    async def _resolve(self) -> None:
        async with self._resolving:
            if self._collection_id is not None:
                return
            url = f"{self._collections_url}/{quote(self._collection, safe='')}"
            try:
                found = json.loads(await self._exchange(self._get(url)))
            except QueryFailed as failure:
                if failure.outcome == "http_4xx" and " 404 " in f" {failure.reason} ":
                    raise QueryFailed("http_4xx", await self._not_found()) from failure
                raise
            except ValueError as exc:
                raise QueryFailed("bad_response", "the collection lookup is not JSON") from exc
            collection_id = found.get("id") if isinstance(found, dict) else None
            if not isinstance(collection_id, str) or not collection_id:
                raise QueryFailed("bad_response", "the collection lookup has no id")
            self._collection_id = collection_id

    async def _not_found(self) -> str:
        where = f"{self._config.tenant}/{self._config.database}"
        message = f"collection {self._collection!r} not found in {where}"
        try:
            listed = json.loads(await self._exchange(self._get(self._collections_url)))
            names = sorted(c["name"] for c in listed if isinstance(c, dict) and "name" in c)
        except (QueryFailed, ValueError, TypeError):
            return f"{message}; check collection:, tenant: and database:"
        if not names:
            return f"{message}, which has no collections; check tenant: and database:"
        shown = ", ".join(names[:SHOWN_COLLECTIONS])
        more = (
            f" and {len(names) - SHOWN_COLLECTIONS} more" if len(names) > SHOWN_COLLECTIONS else ""
        )
        return f"{message}; set collection: to one of {shown}{more}"

    def _get(self, url: str) -> httpx.Request:
        return self._client.build_request(
            "GET", url, headers=self._headers, timeout=httpx.Timeout(self._config.timeout)
        )


def _hits(document: Any) -> list[dict[str, Any]]:
    """Chroma's columns for the one query vector, zipped into hits."""
    if not isinstance(document, dict):
        raise QueryFailed("bad_response", "chroma answered something other than an object")
    columns = {key: _first(document.get(key)) for key in ("ids", "distances", "metadatas")}
    ids = columns["ids"]
    if not isinstance(ids, list):
        raise QueryFailed("bad_response", "chroma answered without ids[0]")
    distances = columns["distances"]
    metadatas = columns["metadatas"]
    if not isinstance(distances, list) or len(distances) != len(ids):
        raise QueryFailed("bad_response", "chroma's distances[0] does not match its ids[0]")
    if not isinstance(metadatas, list) or len(metadatas) != len(ids):
        metadatas = [None] * len(ids)
    return [
        {"id": i, "distance": d, "metadata": m}
        for i, d, m in zip(ids, distances, metadatas, strict=True)
    ]


def _first(column: Any) -> Any:
    return column[0] if isinstance(column, list) and column else None
