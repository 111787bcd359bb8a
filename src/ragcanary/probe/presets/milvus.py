"""Milvus's REST API (v2): ``POST /v2/vectordb/entities/search`` with the canary's vector.

Milvus answers errors with HTTP 200 and a non-zero ``code``; those are failures here. A hit's
``distance`` is a similarity for COSINE and IP collections (the default ``score_order:
desc``) and a distance for L2 ones (say ``score_order: asc``). Relevant ids are looked up
with ``entities/query`` and a filter on the ``id:`` field, its values written as the schema
(``collections/describe``) types them: JSON string literals, which Milvus's parser reads alike.
Their exact scores are computed from the vectors that query fetches, by the metric of the
field's index that the schema names (``vectors.py``).
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
    BATCH,
    MAX_PAGES,
    PAGE,
    held_by_filter,
    integers,
    missing_in_batches,
    scalar,
)
from ragcanary.probe.presets.vectors import Metric, best_scores, cosine, dot, squared_l2
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

INTEGER_TYPES = ("Int8", "Int16", "Int32", "Int64")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a field name Milvus allows
# An index's metric as Milvus's search reports it: L2 is the squared distance (Milvus skips
# the square root), COSINE and IP similarities.
METRICS = {
    "COSINE": Metric(cosine),
    "IP": Metric(dot),
    "L2": Metric(squared_l2, lower_is_better=True),
}


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
        described = await self._describe()
        kind = _field_type(described, field)
        if kind is None:
            return None

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            terms = _any_of(field, kind, batch)
            if terms is None:
                return set(), True  # no value of the field's type: none can be held
            body = {"filter": terms, "outputFields": [field], "limit": PAGE}
            _, got = await self._ask(self._post(f"{self._api}/entities/query", body))
            rows = _hits(got)
            if not isinstance(rows, list):
                raise QueryFailed("bad_response", "milvus's query answered without data")
            values = (scalar(self._id(row)) for row in rows)
            return {v for v in values if v is not None}, len(rows) < PAGE

        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """Every entity of ``ids`` with its vector (``entities/query``, page by page), scored
        by the metric of the field's index as the search reports it (``METRICS``)."""
        field = self._config.id
        if not _FIELD.fullmatch(field):
            return None
        described = await self._describe()
        kind = _field_type(described, field)
        indexed = _vector_index(described, self._config.vector_field)
        if kind is None or indexed is None or indexed[1] not in METRICS:
            return None
        vectors, metric = indexed[0], METRICS[indexed[1]]
        records: list[tuple[str, Any]] = []
        for start in range(0, len(ids), BATCH):
            terms = _any_of(field, kind, ids[start : start + BATCH])
            if terms is not None:
                records += await self._entities(terms, [field, vectors])
        asked = set(ids)
        found = best_scores(((d, row.get(vectors)) for d, row in records), vector, metric)
        return {doc: score for doc, score in found.items() if doc in asked}

    async def _entities(self, terms: str, fields: list[str]) -> list[tuple[str, Any]]:
        """(id, row) of every entity ``terms`` matches, ``PAGE`` at a time."""
        found: list[tuple[str, Any]] = []
        for number in range(MAX_PAGES):
            body = {"filter": terms, "outputFields": fields, "limit": PAGE, "offset": number * PAGE}
            _, got = await self._ask(self._post(f"{self._api}/entities/query", body))
            rows = _hits(got)
            if not isinstance(rows, list):
                raise QueryFailed("bad_response", "milvus's query answered without data")
            for row in rows:
                doc = scalar(self._id(row))
                if doc is not None and isinstance(row, dict):
                    found.append((doc, row))
            if len(rows) < PAGE:
                return found
        raise QueryFailed("bad_response", f"more entities than {MAX_PAGES} pages hold")

    async def _describe(self) -> Any:
        """The collection's schema (``collections/describe``)."""
        _, described = await self._ask(self._post(f"{self._api}/collections/describe", {}))
        return _hits(described)


def _any_of(field: str, kind: str, ids: list[str]) -> str | None:
    """A filter on ``field`` equal to one of ``ids``, as JSON strings, integers or (a dynamic
    field) both; None when no id is a value of the field's type."""
    strings = ", ".join(json.dumps(i, ensure_ascii=False) for i in ids)
    numbers = ", ".join(str(i) for i in integers(ids))
    terms = [f"{field} in [{strings}]"] if kind != "integer" else []
    terms += [f"{field} in [{numbers}]"] if kind != "string" and numbers else []
    return " or ".join(terms) if terms else None


def _vector_index(described: Any, name: str | None) -> tuple[str, str] | None:
    """The searched vector field (``name``, or the collection's only indexed one) and its
    index's metric; None when that cannot be told."""
    indexes = described.get("indexes") if isinstance(described, dict) else None
    found = [
        (str(index.get("fieldName")), str(index.get("metricType")))
        for index in (indexes if isinstance(indexes, list) else ())
        if isinstance(index, dict) and (name is None or index.get("fieldName") == name)
    ]
    return found[0] if len(found) == 1 else None


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
