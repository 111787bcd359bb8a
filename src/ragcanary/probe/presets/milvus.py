"""Milvus's REST API (v2): ``POST /v2/vectordb/entities/search`` with the canary's vector.

Milvus answers errors with HTTP 200 and a non-zero ``code``; those are failures here. A hit's
``distance`` is a similarity for COSINE and IP collections (the default ``score_order:
desc``) and a distance for L2 ones (say ``score_order: asc``). Relevant ids are looked up
with ``entities/query`` and a filter on the ``id:`` field, its values written as the schema
(``collections/describe``) types them: JSON string literals, which Milvus's parser reads alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.lookup import (
    PAGE,
    held_by_filter,
    integers,
    missing_in_batches,
    scalar,
)
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

INTEGER_TYPES = ("Int8", "Int16", "Int32", "Int64")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a field name Milvus allows


class MilvusTarget(HttpTarget):
    """One Milvus collection; ``id:`` reads a hit (``id``, or an output field by name)."""

    SHAPE: ClassVar[Mapping[str, Any]] = {"method": "POST", "results": "data", "score": "distance"}

    def _setup(self, config: TargetConfig) -> None:
        self._results = _hits
        self._api = f"{config.url.rstrip('/')}/v2/vectordb"
        self._url = f"{self._api}/entities/search"
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
            "data": [list(vector or ())],
            "limit": k,
            "outputFields": self._output,
        }
        if config.vector_field is not None:
            body["annsField"] = config.vector_field
        return self._post(self._url, body)

    def _post(self, url: str, body: dict[str, Any]) -> httpx.Request:
        """A request on the collection (and database, unless the default one)."""
        config = self._config
        body = {"collectionName": config.collection, **body}
        if config.database != "default_database":
            body["dbName"] = config.database
        return self._client.build_request("POST", url, json=body, headers=self._headers)

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``POST .../entities/query`` with ``field in [...]``, typed as the schema says."""
        field = self._config.id
        if not _FIELD.fullmatch(field):
            return None  # a path into a JSON field: not looked up
        _, described = await self._ask(self._post(f"{self._api}/collections/describe", {}))
        kind = _field_type(_hits(described), field)
        if kind is None:
            return None

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            strings = ", ".join(json.dumps(i, ensure_ascii=False) for i in batch)
            numbers = ", ".join(str(i) for i in integers(batch))
            terms = [f"{field} in [{strings}]"] if kind != "integer" else []
            terms += [f"{field} in [{numbers}]"] if kind != "string" and numbers else []
            if not terms:
                return set(), True  # no value of the field's type: none can be held
            body = {"filter": " or ".join(terms), "outputFields": [field], "limit": PAGE}
            _, got = await self._ask(self._post(f"{self._api}/entities/query", body))
            rows = _hits(got)
            if not isinstance(rows, list):
                raise QueryFailed("bad_response", "milvus's query answered without data")
            values = (scalar(self._id(row)) for row in rows)
            return {v for v in values if v is not None}, len(rows) < PAGE

        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))


def _field_type(described: Any, name: str) -> str | None:
    """Whether the field ``name`` holds strings, integers or (a dynamic field) either."""
    fields = described.get("fields") if isinstance(described, dict) else None
    for field in fields if isinstance(fields, list) else ():
        if isinstance(field, dict) and field.get("name") == name:
            kind = str(field.get("type", ""))
            if kind.startswith("VarChar"):
                return "string"
            return "integer" if kind in INTEGER_TYPES else None
    dynamic = isinstance(described, dict) and described.get("enableDynamicField") is True
    return "any" if dynamic else None


def _hits(document: Any) -> Any:
    """The hit list, or the error Milvus reported inside a 200 answer."""
    if not isinstance(document, dict):
        raise QueryFailed("bad_response", "milvus answered something other than an object")
    code = document.get("code", 0)
    if code != 0:
        message = str(document.get("message", ""))[:300]
        raise QueryFailed("bad_response", f"milvus error {code}: {message}")
    return document.get("data")
