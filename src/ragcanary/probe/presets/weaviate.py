"""Weaviate's GraphQL API: ``POST /v1/graphql`` with a ``Get`` query on one class.

``search:`` picks the operator: ``nearVector`` (the canary's vector, from ``embedding:``),
``nearText`` (Weaviate's vectorizer embeds the text), ``bm25`` or ``hybrid``. A near* search
is read by ``_additional.distance`` (lower is closer), bm25 and hybrid by ``_additional.score``
(higher is better; Weaviate sends it as a string). Class and property names are checked
names (``config/presets.py``); the canary's text and vector are JSON literals, which GraphQL
reads alike. Weaviate takes a vector only as a literal, never from a GraphQL variable.
Query errors come back in a 200 answer, under ``errors``: they are failures here. For the
diagnosis, a nearVector target's lost ids are scored from their stored vectors by the class's
distance (its schema, read once; ``vectors.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ragcanary.config.presets import NAME
from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.collection import one_of
from ragcanary.probe.presets.lookup import (
    BATCH,
    MAX_PAGES,
    PAGE,
    held_by_filter,
    missing_in_batches,
    scalar,
    uuids,
)
from ragcanary.probe.presets.vectors import Metric, best_scores, cosine, dot, manhattan, squared_l2
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

ADDITIONAL = "_additional { id distance score }"
# A vector written into a query: more than eight numbers in a GraphQL list.
_LONG_VECTOR = re.compile(r"\[((?:-?[0-9][0-9.eE+-]*, ){8,}-?[0-9][0-9.eE+-]*)\]")
_Ranked = tuple[tuple[str, ...], tuple[float | None, ...]]  # ids and their scores
# A class's distance as nearVector's _additional.distance reports it.
DISTANCES = {
    "cosine": Metric(lambda a, b: 1.0 - cosine(a, b), lower_is_better=True),
    "dot": Metric(lambda a, b: -dot(a, b), lower_is_better=True),
    "l2-squared": Metric(squared_l2, lower_is_better=True),
    "manhattan": Metric(manhattan, lower_is_better=True),
}


class UnknownClass(QueryFailed):
    """Weaviate has no class of the configured name."""

    def __init__(self, name: str) -> None:
        super().__init__("bad_response", f"class {name!r} not found")


class WeaviateTarget(HttpTarget):
    """One Weaviate class (collection); ``id:`` reads ``_additional.id`` or a property."""

    AUTH_HINT: ClassVar[str] = (
        'Weaviate takes an API key as headers: {Authorization: "Bearer ${WEAVIATE_API_KEY}"}'
    )

    def _shape(self, config: TargetConfig) -> Mapping[str, Any]:
        near = (config.search or "nearVector").startswith("near")
        return {
            "method": "POST",
            "results": f"data.Get.{config.collection}",  # read by _hits, named in messages
            "id": "_additional.id" if config.id in ("id", "_additional.id") else config.id,
            "score": "_additional.distance" if near else "_additional.score",
        }

    def _setup(self, config: TargetConfig) -> None:
        assert config.collection is not None  # the config model requires the class
        self._class = config.collection
        self._operator = config.search or "nearVector"
        self._base = config.url.rstrip("/")
        self._results = self._hits
        path = self._config.id
        self._fields = ADDITIONAL if path == "_additional.id" else f"{_select(path)} {ADDITIONAL}"
        self._distance_name: str | None = None  # the class's, once its schema said it

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The class's top ``k`` by the configured operator."""
        if self._config.embedding is not None and vector is None:
            reason = f"the weaviate {self._operator} search needs the query's vector"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def graphql(self, query: str, k: int, vector: Sequence[float] | None) -> str:
        """The ``Get`` query for one canary."""
        config = self._config
        text = _literal(query)
        targets = f", targetVectors: [{_literal(config.using)}]" if config.using else ""
        fields = f", properties: [{_literal(config.text_field)}]" if config.text_field else ""
        if self._operator == "nearVector":
            operator = f"nearVector: {{vector: {_vector(vector)}{targets}}}"
        elif self._operator == "nearText":
            operator = f"nearText: {{concepts: [{text}]{targets}}}"
        elif self._operator == "bm25":
            operator = f"bm25: {{query: {text}{fields}}}"
        else:
            given = f", vector: {_vector(vector)}" if vector is not None else ""
            operator = f"hybrid: {{query: {text}{given}{fields}{targets}}}"
        return f"{{ Get {{ {self._class}(limit: {k}, {operator}) {{ {self._fields} }} }} }}"

    def describe_last_request(self) -> str:
        """As every target's, with the vector inside the GraphQL query cut short too."""
        return _LONG_VECTOR.sub(_shortened, super().describe_last_request())

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        return self._client.build_request(
            "POST",
            f"{self._base}/v1/graphql",
            json={"query": self.graphql(query, k, vector)},
            headers=self._headers,
        )

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """A ``Get`` with a ``where`` filter: ``ContainsAny`` on the object id or the property."""
        path = self._config.id
        if path == "_additional.id":
            keys = uuids(ids)  # an object id is a UUID; any other id cannot be one

            async def held(batch: list[str]) -> set[str]:
                objects = await self._where("id", batch, len(batch))
                return {v for v in (scalar(self._id(o)) for o in objects) if v is not None}

            return await missing_in_batches(keys, held) | (set(ids) - set(keys))
        if "." in path:
            return None  # Weaviate filters on a nested object's property not at all

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            objects = await self._where(path, batch, PAGE)
            values = (scalar(self._id(o)) for o in objects)
            return {v for v in values if v is not None}, len(objects) < PAGE

        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """The objects of ``ids`` with their vectors (the ``where`` of ``_missing``, page by
        page), scored by the class's distance as nearVector reports it (``DISTANCES``); only a
        nearVector search is scored by the canary's vector."""
        using = self._config.using
        if self._operator != "nearVector" or (using is not None and not NAME.fullmatch(using)):
            return None
        path = self._config.id
        if path != "_additional.id" and "." in path:
            return None
        metric = DISTANCES.get(await self._distance())
        if metric is None:
            return None
        vector_field = "vector" if using is None else f"vectors {{ {using} }}"
        where, asked = ("id", uuids(ids)) if path == "_additional.id" else (path, ids)
        records: list[tuple[str, object]] = []
        for start in range(0, len(asked), BATCH):
            batch = asked[start : start + BATCH]
            for number in range(MAX_PAGES):
                objects = await self._where(where, batch, PAGE, number * PAGE, vector_field)
                records += ((doc, _vector_of(o, using)) for doc, o in self._ids_of(objects))
                if len(objects) < PAGE:
                    break
            else:
                raise QueryFailed("bad_response", f"more objects than {MAX_PAGES} pages hold")
        wanted = set(asked)  # a text property matches by its words: other values come too
        found = best_scores(records, vector, metric)
        return {doc: score for doc, score in found.items() if doc in wanted}

    async def _distance(self) -> str:
        """The distance of the searched vector's index, from the class's schema, asked once."""
        if self._distance_name is None:
            schema = await self._fetch_json(f"{self._base}/v1/schema/{self._class}")
            using = self._config.using
            try:
                config = schema["vectorConfig"][using] if using is not None else schema
                distance = config["vectorIndexConfig"]["distance"]
            except (KeyError, TypeError):
                raise QueryFailed("bad_response", "the class's schema names no distance") from None
            self._distance_name = str(distance)
        return self._distance_name

    def _ids_of(self, objects: list[Any]) -> list[tuple[str, Any]]:
        """(id, object) of each object whose id reads as one."""
        found = ((scalar(self._id(o)), o) for o in objects)
        return [(doc, o) for doc, o in found if doc is not None]

    async def _where(
        self, path: str, values: list[str], limit: int, offset: int = 0, vector: str = ""
    ) -> list[Any]:
        """The class's objects whose ``path`` is one of ``values``, ``limit`` at most from
        ``offset``, with ``vector`` (a selection of ``_additional``) when asked."""
        where = (
            f"where: {{path: [{_literal(path)}], operator: ContainsAny, "
            f"valueText: {json.dumps(values, ensure_ascii=False)}}}"
        )
        page = f"limit: {limit}" + (f", offset: {offset}" if offset else "")
        # Only the id: a distance or score means nothing without a search operator.
        additional = f"_additional {{ id {vector} }}" if vector else "_additional { id }"
        fields = additional if path == "id" else f"{_select(path)} {additional}"
        query = f"{{ Get {{ {self._class}({page}, {where}) {{ {fields} }} }} }}"
        request = self._client.build_request(
            "POST",
            f"{self._base}/v1/graphql",
            json={"query": query},
            headers=self._headers,
        )
        return self._hits((await self._ask(request))[1])

    async def _search_once(self, query: str, k: int, vector: Sequence[float] | None) -> _Ranked:
        try:
            return await super()._search_once(query, k, vector)
        except UnknownClass as failure:
            raise QueryFailed("bad_response", await self._not_found(failure.reason)) from None

    async def _not_found(self, message: str) -> str:
        """``message``, and the classes there are to choose from."""
        sent = self.last_request  # `validate --live` shows the query, not this look-up
        try:
            schema = await self._fetch_json(f"{self._base}/v1/schema")
            names = [c["class"] for c in schema["classes"]]
        except (QueryFailed, ValueError, TypeError, KeyError):
            return f"{message}; check collection:"
        finally:
            self.last_request = sent
        if not names:
            return f"{message}, where there are no classes"
        return f"{message}; set collection: to {one_of(names)}"

    def _hits(self, document: Any) -> list[Any]:
        """The class's objects, scores as numbers; or the errors GraphQL reported."""
        if not isinstance(document, dict):
            raise QueryFailed("bad_response", "weaviate answered something other than an object")
        errors = document.get("errors")
        if errors:
            raise self._failure(errors)
        data = document.get("data")
        found = data.get("Get") if isinstance(data, dict) else None
        hits = found.get(self._class) if isinstance(found, dict) else None
        if not isinstance(hits, list):
            where = f"data.Get.{self._class}"
            raise QueryFailed("bad_response", f"weaviate answered no list of objects at {where}")
        return [_numeric_score(hit) for hit in hits]

    def _failure(self, errors: Any) -> QueryFailed:
        first = errors[0] if isinstance(errors, list) else errors
        message = first.get("message") if isinstance(first, dict) else None
        message = " ".join(str(message if message is not None else first).split())[:300]
        if f'Cannot query field "{self._class}" on type "GetObjectsObj"' in message:
            return UnknownClass(self._class)
        if f'on type "{self._class}"' in message and message.startswith("Cannot query field"):
            fix = "set id: to one of its properties, or remove id: for the object's UUID"
            return QueryFailed("bad_response", f"weaviate error: {message}; {fix}")
        if 'Unknown argument "nearText"' in message:
            fix = "the class has no text vectorizer: use search: bm25 or hybrid, or embedding:"
            return QueryFailed("bad_response", f"weaviate error: {message}; {fix}")
        return QueryFailed("bad_response", f"weaviate error: {message}")

    def _error_message(self, code: int, error: Any) -> str | None:
        # Weaviate's REST errors: {"error": [{"message": "..."}]}, or {"code": ..., "message": ...}
        listed = error.get("error") if isinstance(error, dict) else None
        if isinstance(listed, list) and listed and isinstance(listed[0], dict):
            return str(listed[0].get("message", ""))
        message = error.get("message") if isinstance(error, dict) else None
        return message if isinstance(message, str) else None


def _vector_of(found: Any, using: str | None) -> object:
    """An object's vector: ``_additional.vector``, or its named vector ``using``."""
    extra = found.get("_additional") if isinstance(found, dict) else None
    if not isinstance(extra, dict):
        return None
    if using is None:
        return extra.get("vector")
    named = extra.get("vectors")
    return named.get(using) if isinstance(named, dict) else None


def _select(path: str) -> str:
    """The GraphQL selection of a (checked) dotted property path: ``meta { doc_id }``."""
    head, _, rest = path.partition(".")
    return f"{head} {{ {_select(rest)} }}" if rest else head


def _literal(text: str | None) -> str:
    """A GraphQL string literal: JSON's escaping is GraphQL's (quotes, backslashes, controls)."""
    return json.dumps(text, ensure_ascii=False)


def _vector(vector: Sequence[float] | None) -> str:
    """A GraphQL list of floats."""
    return json.dumps([float(x) for x in vector or ()])


def _shortened(vector: re.Match[str]) -> str:
    numbers = vector.group(1).split(", ")
    return f"[{', '.join(numbers[:3])}, ... {len(numbers)} numbers]"


def _numeric_score(hit: Any) -> Any:
    """``hit`` with ``_additional.score``, a string in Weaviate's answer, as a number."""
    extra = hit.get("_additional") if isinstance(hit, dict) else None
    if not isinstance(extra, dict) or not isinstance(extra.get("score"), str):
        return hit
    score = extra["score"]
    try:
        number: Any = float(score)
    except ValueError:
        number = score  # reported by the generic check as "not a number"
    return {**hit, "_additional": {**extra, "score": number}}
