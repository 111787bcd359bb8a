"""RushDB's semantic search: ``POST /api/v1/ai/search`` over a label and an indexed property.

``collection:`` is the label, ``text_field:`` the property whose embedding index is searched.
RushDB embeds the canary's text itself (a managed index); with ``embedding:`` the vector is
sent as ``queryVector`` instead (an external index). Hits are the records of ``data[]``:
``__id`` (the default id here) or one of their properties (``id: doc_id``), and ``__score``,
a similarity: higher is better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.collection import one_of
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

_Ranked = tuple[tuple[str, ...], tuple[float | None, ...]]  # ids and their scores


class RushDBTarget(HttpTarget):
    """One label's records, ranked by similarity of one property to the canary."""

    AUTH_HINT: ClassVar[str] = (
        'RushDB takes an API key as headers: {Authorization: "Bearer ${RUSHDB_API_KEY}"}'
    )

    def _shape(self, config: TargetConfig) -> Mapping[str, Any]:
        return {
            "method": "POST",
            "results": "data",
            "id": "__id" if config.id == "id" else config.id,
            "score": "__score",
        }

    def _setup(self, config: TargetConfig) -> None:
        self._results = _hits
        # The API's base is documented as https://api.rushdb.com/api/v1; either form will do.
        self._api = config.url.rstrip("/").removesuffix("/api/v1") + "/api/v1"
        self._label = config.collection
        self._property = config.text_field

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The label's ``k`` records most similar to the canary (its text, or its vector)."""
        if self._config.embedding is not None and vector is None:
            reason = "the rushdb search by queryVector needs the query's vector"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        body: dict[str, Any] = {"propertyName": self._property, "labels": [self._label]}
        if vector is None:
            body["query"] = query
        else:
            body["queryVector"] = list(vector)
        body["limit"] = k
        return self._client.build_request(
            "POST",
            f"{self._api}/ai/search",
            json=body,
            headers=self._headers,
        )

    async def _search_once(self, query: str, k: int, vector: Sequence[float] | None) -> _Ranked:
        try:
            return await super()._search_once(query, k, vector)
        except QueryFailed as failure:
            if failure.outcome != "http_4xx" or not failure.reason.startswith("HTTP 404"):
                raise
            raise QueryFailed("http_4xx", await self._no_index(failure.reason)) from None

    async def _no_index(self, reason: str) -> str:
        """``reason``, and the (label, property) pairs that do have an embedding index."""
        sent = self.last_request  # `validate --live` shows the search, not this look-up
        try:
            listed = await self._fetch_json(f"{self._api}/ai/indexes")
            names = [f"{i['label']}.{i['propertyName']}" for i in listed["data"]]
        except (QueryFailed, ValueError, TypeError, KeyError):
            return f"{reason}; check collection: (the label) and text_field: (the property)"
        finally:
            self.last_request = sent
        if not names:
            return f"{reason}; the project has no embedding index: create one for the property"
        return (
            f"{reason}; set collection: and text_field: to a label and property of {one_of(names)}"
        )

    def _error_message(self, code: int, error: Any) -> str | None:
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, list):  # a validation error lists one message per field
            message = "; ".join(str(m) for m in message)
        return message if isinstance(message, str) else None


def _hits(document: Any) -> Any:
    """``data``, or the error RushDB reported with ``success: false``."""
    if not isinstance(document, dict):
        raise QueryFailed("bad_response", "rushdb answered something other than an object")
    if document.get("success") is False:
        message = " ".join(str(document.get("message", "")).split())[:300]
        raise QueryFailed("bad_response", f"rushdb error: {message or 'success: false'}")
    return document.get("data")
