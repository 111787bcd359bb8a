"""Elasticsearch and OpenSearch: ``POST /{index}/_search``, kNN with the vector or BM25 text.

Both answer ``hits.hits[]`` with ``_id`` and ``_score`` (higher is better, for kNN too:
the engines turn distances into similarities). ``id:`` reads a hit, so ``_id`` (the default
here) or ``_source.doc_id``; only that source field is asked for, never the documents. For
the diagnosis, a ``script_score`` restricted to the lost ids recomputes their kNN ``_score``
exactly (``knn_scores.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.knn_scores import exact_score
from ragcanary.probe.presets.lookup import (
    PAGE,
    best_by_filter,
    held_by_filter,
    missing_in_batches,
    scalar,
    score_of,
)
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

# kNN candidates per shard: ten times k, as the engines' guides suggest, within their limit.
CANDIDATES_PER_K = 10
MAX_CANDIDATES = 10_000
# Fields whose whole value a terms query matches (text is split into words first).
KEYWORD_TYPES = ("keyword", "constant_keyword", "wildcard")


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
        self._index = f"{config.url.rstrip('/')}/{quote(config.collection, safe='')}"
        self._url = f"{self._index}/_search"
        source = id_path.removeprefix("_source.")
        self._source: bool | list[str] = [source] if source != id_path else False

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The index's top ``k``: nearest to ``vector`` with an embedding, else BM25 on text."""
        if self._config.embedding is not None and vector is None:
            reason = f"the {self._config.preset} kNN search needs the query's vector"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        return self._build("POST", self._url, self._body(query, k, vector))

    def _build(self, method: str, url: str, body: Any = None) -> httpx.Request:
        return self._client.build_request(method, url, json=body, headers=self._headers)

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``_mget`` by ``_id``, or a ``terms`` query on the keyword field of ``_source.X``."""
        if self._config.id == "_id":
            return await missing_in_batches(ids, self._held_ids)
        if self._source is False:
            return None  # an id: read from elsewhere in the hit cannot be looked up
        assert isinstance(self._source, list)  # [the source field], False above
        exact = await self._exact_field(self._source[0])
        if exact is None:
            return None
        field, longest = exact
        # Longer values are not indexed (ignore_above): a terms query cannot find them.
        ids = [i for i in ids if longest is None or len(i) <= longest]

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            body = {
                "size": PAGE,
                "_source": self._source,
                "track_total_hits": False,
                "query": {"terms": {field: batch}},
            }
            _, got = await self._ask(self._build("POST", self._url, body))
            hits = self._results(got)
            if not isinstance(hits, list):
                raise QueryFailed("bad_response", "the terms query answered no hits.hits")
            values = (scalar(self._id(hit)) for hit in hits)
            return {v for v in values if v is not None}, len(hits) < PAGE

        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """A ``script_score`` over ``ids`` (an ``ids`` query, or ``terms`` on the keyword field
        of ``_source.X``) whose script gives each document the kNN search's own ``_score``
        (``knn_scores.py``); None for a BM25 search or a field whose kNN score is unknown."""
        config = self._config
        if config.embedding is None or config.vector_field is None:
            return None  # a BM25 search: no vector to score by
        if config.id == "_id":
            asked = ids

            def only(batch: list[str]) -> dict[str, Any]:
                return {"ids": {"values": batch}}
        elif self._source is False:
            return None  # an id: read from elsewhere in the hit cannot be looked up
        else:
            assert isinstance(self._source, list)  # [the source field], False above
            exact = await self._exact_field(self._source[0])
            if exact is None:
                return None
            field, longest = exact
            asked = [i for i in ids if longest is None or len(i) <= longest]

            def only(batch: list[str]) -> dict[str, Any]:
                return {"terms": {field: batch}}

        spec = await self._field_mapping(config.vector_field)
        scoring = exact_score(config.preset, spec, config.vector_field, vector)
        if scoring is None:
            return None
        with_vector = {"exists": {"field": config.vector_field}}  # a chunk without one: no score

        async def page(batch: list[str]) -> tuple[list[tuple[str, float]], bool]:
            query = {"bool": {"filter": [only(batch), with_vector]}}
            body = {
                "size": PAGE,
                "_source": self._source,
                "track_total_hits": False,
                "query": {"script_score": {"query": query, "script": scoring.script}},
            }
            _, got = await self._ask(self._build("POST", self._url, body))
            shards = got.get("_shards") if isinstance(got, dict) else None
            if isinstance(shards, dict) and shards.get("failed"):
                raise QueryFailed("bad_response", "the exact search failed on some shards")
            hits = self._results(got)
            if not isinstance(hits, list):
                raise QueryFailed("bad_response", "the exact search answered no hits.hits")
            ranked = []
            for hit in hits:
                doc = scalar(self._id(hit))
                if doc is not None:
                    ranked.append((doc, scoring.as_knn(score_of(hit.get("_score")))))
            return ranked, len(hits) < PAGE

        return await best_by_filter(asked, page)

    async def _held_ids(self, batch: list[str]) -> set[str]:
        """Which of the ``_id``s ``batch`` the index holds; a document _mget could not read
        (a failed shard) makes the whole answer unusable."""
        _, got = await self._ask(
            self._build("POST", f"{self._index}/_mget?_source=false", {"ids": batch})
        )
        docs = got.get("docs") if isinstance(got, dict) else None
        if not isinstance(docs, list):
            raise QueryFailed("bad_response", "_mget answered without docs")
        held = set()
        for doc in docs:
            if not isinstance(doc, dict) or "error" in doc:
                raise QueryFailed("bad_response", "_mget could not read every document")
            if doc.get("found") is True:
                held.add(str(doc.get("_id")))
        return held

    async def _exact_field(self, path: str) -> tuple[str, int | None] | None:
        """The field a ``terms`` query matches ``path``'s whole value on, in every index,
        and the longest value it indexes; None when there is none (a text field, say)."""
        specs = await self._mappings(path)
        found = {_keyword(path, spec) for spec in specs}
        return found.pop() if specs and len(found) == 1 else None

    async def _field_mapping(self, path: str) -> Any:
        """The mapping of ``path``, defaults included, when every index behind the name maps
        it alike (an alias may span several); else None."""
        specs = await self._mappings(path, "?include_defaults=true")
        return specs[0] if specs and all(spec == specs[0] for spec in specs) else None

    async def _mappings(self, path: str, query: str = "") -> list[Any]:
        """``path``'s mapping in each index behind the name; none when one does not map it."""
        url = f"{self._index}/_mapping/field/{quote(path, safe='')}{query}"
        _, got = await self._ask(self._build("GET", url))
        leaf = path.rpartition(".")[2]
        specs = []
        for index in got.values() if isinstance(got, dict) else ():
            try:
                specs.append(index["mappings"][path]["mapping"][leaf])
            except (KeyError, TypeError):
                return []  # not mapped in this index: its values cannot be searched
        return specs

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


def _keyword(path: str, spec: Any) -> tuple[str, int | None] | None:
    """``path`` itself when it is a keyword field, else its keyword sub-field, if any."""
    if not isinstance(spec, dict):
        return None
    if spec.get("type") in KEYWORD_TYPES:
        return path, spec.get("ignore_above")
    if spec.get("type") != "text" or not isinstance(spec.get("fields"), dict):
        return None
    for name, sub in sorted(spec["fields"].items()):
        if isinstance(sub, dict) and sub.get("type") in KEYWORD_TYPES:
            return f"{path}.{name}", sub.get("ignore_above")
    return None
