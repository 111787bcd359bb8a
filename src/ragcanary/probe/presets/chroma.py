"""Chroma's REST API (v2): the collection by name, queried with the canary's vector.

Chroma answers column-wise (``ids: [[...]]``, ``distances: [[...]]``, ``metadatas: [[...]]``,
one inner list per query vector); the hits are those columns zipped, so that ``id:`` may
point into a hit's ``metadata`` (``metadata.doc_id``). Its scores are distances.

For the diagnosis, an id's exact score is computed here from its stored vectors (``get`` with
``include: ["embeddings"]``) by the collection's own distance (``SPACES``): Chroma searches
approximately only, so this is how far the id really is from the query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.fingerprint import IndexState, Setting
from ragcanary.probe.documents import cut
from ragcanary.probe.presets.collection import CollectionTarget
from ragcanary.probe.presets.lookup import (
    MAX_PAGES,
    PAGE,
    held_by_filter,
    integers,
    missing_in_batches,
    scalar,
)
from ragcanary.probe.presets.vectors import Metric, best_scores, cosine, dot, squared_l2
from ragcanary.probe.retries import QueryFailed

# A collection's distance ("space") as Chroma computes it: lower is nearer.
SPACES: Mapping[str, Metric] = {
    "l2": Metric(squared_l2, lower_is_better=True),
    "ip": Metric(lambda a, b: 1.0 - dot(a, b), lower_is_better=True),
    "cosine": Metric(lambda a, b: 1.0 - cosine(a, b), lower_is_better=True),
}


class ChromaTarget(CollectionTarget):
    """A Chroma collection of one tenant and database."""

    # The hit list is built here (_hits); HttpTarget reads each hit's id and distance from it.
    SHAPE: ClassVar[Mapping[str, Any]] = {"method": "POST", "results": "hits", "score": "distance"}

    def _setup(self, config: TargetConfig) -> None:
        super()._setup(config)
        self._results = _hits
        self._space: str | None = None  # the collection's distance, from its lookup
        self._settings: dict[str, Setting] = {}  # its index's settings, from its lookup
        self._collections_url = (
            f"{config.url.rstrip('/')}/api/v2/tenants/{quote(config.tenant, safe='')}"
            f"/databases/{quote(config.database, safe='')}/collections"
        )

    async def _lookup(self) -> str:
        """The collection's id."""
        url = f"{self._collections_url}/{quote(self._collection, safe='')}"
        where = f"{self._config.tenant}/{self._config.database}"
        found = await self._lookup_json(url, where)
        collection_id = found.get("id") if isinstance(found, dict) else None
        if not isinstance(collection_id, str) or not collection_id:
            raise QueryFailed("bad_response", "the collection lookup has no id")
        self._space = _space(found)
        self._settings = _index_settings(found)
        return collection_id

    async def _list_names(self) -> list[str]:
        listed = await self._fetch_json(self._collections_url)
        return [c["name"] for c in listed if isinstance(c, dict) and "name" in c]

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        body = {
            "query_embeddings": [list(vector or ())],
            "n_results": k,
            "include": ["distances", "metadatas"],
        }
        return self._post(f"{self._collections_url}/{self._found}/query", body)

    async def _index_state(self) -> IndexState:
        """``GET .../collections/{id}/count``: how many records (chunks) the collection holds,
        and its index's settings as its lookup gave them."""
        url = f"{self._collections_url}/{await self._look_up_once()}/count"
        count = await self._fetch_json(url)
        if not isinstance(count, int) or isinstance(count, bool):
            raise QueryFailed("bad_response", f"chroma's count is not a number: {count!r}")
        return IndexState(count, dict(self._settings) or None)

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``POST .../collections/{id}/get`` by ``ids``, or with a ``where`` on the metadata."""
        field = self._config.id.removeprefix("metadata.")
        if self._config.id != "id" and (field == self._config.id or "." in field):
            return None  # Chroma's metadata is flat: only metadata.X can be filtered on
        url = f"{self._collections_url}/{await self._look_up_once()}/get"

        async def held(batch: list[str]) -> set[str]:
            _, got = await self._ask(self._post(url, {"ids": batch, "include": []}))
            return {str(i) for i in _column(got, "ids")}

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            body = {"where": _any_of(field, batch), "include": ["metadatas"], "limit": PAGE}
            _, got = await self._ask(self._post(url, body))
            rows = _column(got, "metadatas")
            values = (scalar(self._id({"metadata": row})) for row in rows)
            return {v for v in values if v is not None}, len(rows) < PAGE

        if self._config.id == "id":
            return await missing_in_batches(ids, held)
        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))

    async def _texts(self, ids: list[str]) -> dict[str, str] | None:
        """``POST .../get`` with ``include: ["documents"]`` by key, or with a ``where`` on the
        metadata field; a document of several chunks is their texts joined in stored order."""
        field = self._config.id.removeprefix("metadata.")
        by_key = self._config.id == "id"
        if not by_key and (field == self._config.id or "." in field):
            return None
        url = f"{self._collections_url}/{await self._look_up_once()}/get"
        chunks: dict[str, list[str]] = {}
        for start in range(0, len(ids), PAGE):
            batch = ids[start : start + PAGE]
            body: dict[str, Any] = (
                {"ids": batch, "include": ["documents"]}
                if by_key
                else {"where": _any_of(field, batch), "include": ["documents", "metadatas"]}
            )
            _, got = await self._ask(self._post(url, body))
            texts = _column(got, "documents")
            owners = (
                [str(i) for i in _column(got, "ids")]
                if by_key
                else [scalar(self._id({"metadata": row})) for row in _column(got, "metadatas")]
            )
            for owner, text in zip(owners, texts, strict=True):
                if owner is not None and isinstance(text, str):
                    chunks.setdefault(owner, []).append(text)
        wanted = set(ids)
        return {doc: cut("\n".join(parts)) for doc, parts in chunks.items() if doc in wanted}

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """Each held id's smallest distance to ``vector`` over its stored vectors (its chunks),
        computed by the collection's space; None for a space this does not know."""
        url = f"{self._collections_url}/{await self._look_up_once()}/get"
        metric = SPACES.get(self._space or "")
        if metric is None:
            return None
        best = best_scores(await self._vectors(url, ids), vector, metric)
        wanted = set(ids)
        return {doc: score for doc, score in best.items() if doc in wanted}

    async def _vectors(self, url: str, ids: list[str]) -> list[tuple[str, object]]:
        """(id, stored vector) of every record of ``ids``: by key, or every chunk whose
        metadata field holds one of them, page by page."""
        found: list[tuple[str, object]] = []
        if self._config.id == "id":
            for start in range(0, len(ids), PAGE):
                keys = {"ids": ids[start : start + PAGE], "include": ["embeddings"]}
                _, got = await self._ask(self._post(url, keys))
                found += zip(map(str, _column(got, "ids")), _column(got, "embeddings"), strict=True)
            return found
        field = self._config.id.removeprefix("metadata.")
        if field == self._config.id or "." in field:
            raise QueryFailed("bad_response", "chroma's metadata is flat: no field to filter on")
        for page in range(MAX_PAGES):
            body: dict[str, Any] = {
                "where": _any_of(field, ids),
                "include": ["embeddings", "metadatas"],
                "limit": PAGE,
                "offset": page * PAGE,
            }
            _, got = await self._ask(self._post(url, body))
            rows = _column(got, "metadatas")
            for row, stored in zip(rows, _column(got, "embeddings"), strict=True):
                doc = scalar(self._id({"metadata": row}))
                if doc is not None:
                    found.append((doc, stored))
            if len(rows) < PAGE:
                return found
        raise QueryFailed("bad_response", f"more chunks than {MAX_PAGES} pages hold")


def _space(collection: Any) -> str:
    """A collection's distance: its configuration's, else its legacy ``hnsw:space`` metadata,
    else Chroma's default ``l2``."""
    configuration = collection.get("configuration_json") or {}
    for index in ("hnsw", "spann"):
        settings = configuration.get(index) if isinstance(configuration, dict) else None
        if isinstance(settings, dict) and isinstance(settings.get("space"), str):
            return str(settings["space"])
    metadata = collection.get("metadata") or {}
    space = metadata.get("hnsw:space") if isinstance(metadata, dict) else None
    return space if isinstance(space, str) else "l2"


def _index_settings(collection: Any) -> dict[str, Setting]:
    """The scalar settings of a collection's index (``hnsw.ef_search``, ``spann.…``)."""
    configuration = collection.get("configuration_json") or {}
    found: dict[str, Setting] = {}
    for index in ("hnsw", "spann"):
        settings = configuration.get(index) if isinstance(configuration, dict) else None
        if isinstance(settings, dict):
            found |= {
                f"{index}.{key}": value
                for key, value in sorted(settings.items())
                if isinstance(value, str | int | float | bool)
            }
    return found


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


def _column(document: Any, key: str) -> list[Any]:
    """One column of a ``get`` answer (``ids``, ``metadatas``): one entry per record."""
    column = document.get(key) if isinstance(document, dict) else None
    if not isinstance(column, list):
        raise QueryFailed("bad_response", f"chroma's get answered without {key}")
    return column


def _any_of(field: str, ids: list[str]) -> dict[str, Any]:
    """A ``where`` matching ``field`` equal to one of ``ids``, as text or as an integer."""
    numbers = integers(ids)
    where: dict[str, Any] = {field: {"$in": ids}}
    return {"$or": [where, {field: {"$in": numbers}}]} if numbers else where
