"""Qdrant's REST API: ``POST /collections/{c}/points/query`` with the canary's vector.

The collection is read first: its vectors (named or not) say whether ``using:`` is right,
and its distance which way scores point. Cosine and Dot scores are similarities; Euclid and
Manhattan scores are distances, so such a target must say ``score_order: asc``. For the
diagnosis, the same query restricted to the lost ids with ``params: {exact: true}`` gives their
exact scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.fingerprint import IndexState
from ragcanary.probe.presets.collection import CollectionTarget
from ragcanary.probe.presets.lookup import (
    BATCH,
    MAX_UINT64,
    PAGE,
    best_by_filter,
    held_by_filter,
    integers,
    missing_in_batches,
    scalar,
    score_of,
    uuids,
)
from ragcanary.probe.retries import QueryFailed

DISTANCE_SCORE_ORDER = {"Cosine": "desc", "Dot": "desc", "Euclid": "asc", "Manhattan": "asc"}


class QdrantTarget(CollectionTarget):
    """One Qdrant collection; ``id:`` reads a point (``id``, or ``payload.doc_id``)."""

    SHAPE: ClassVar[Mapping[str, Any]] = {
        "method": "POST",
        "results": "result.points",
        "score": "score",
    }

    def _setup(self, config: TargetConfig) -> None:
        super()._setup(config)
        self._collections_url = f"{config.url.rstrip('/')}/collections"
        self._url = f"{self._collections_url}/{quote(self._collection, safe='')}"
        field = config.id.removeprefix("payload.")
        self._payload: bool | list[str] = [field] if field != config.id else False

    async def _lookup(self) -> bool:
        """Check ``using`` and ``score_order`` against the collection's vectors."""
        found = await self._lookup_json(self._url)
        try:
            vectors = found["result"]["config"]["params"]["vectors"]
        except (KeyError, TypeError):
            raise QueryFailed(
                "bad_response", "the collection's vectors are not in its info"
            ) from None
        using = self._config.using
        if isinstance(vectors, dict) and "distance" not in vectors:  # named vectors
            names = sorted(vectors)
            if using is None or using not in vectors:
                said = "no using:" if using is None else f"using: {using!r}"
                raise QueryFailed(
                    "bad_response",
                    f"collection {self._collection!r} has named vectors {', '.join(names)}, "
                    f"but the target says {said}; set using: to one of them",
                )
            vectors = vectors[using]
        elif using is not None:
            raise QueryFailed(
                "bad_response",
                f"collection {self._collection!r} has one unnamed vector; remove using:",
            )
        distance = vectors.get("distance") if isinstance(vectors, dict) else None
        implied = DISTANCE_SCORE_ORDER.get(str(distance))
        if implied is not None and implied != self._config.score_order:
            kind = "distances" if implied == "asc" else "similarities"
            raise QueryFailed(
                "bad_response",
                f"collection {self._collection!r} uses {distance} distance, whose scores are "
                f"{kind}; set score_order: {implied} on the target",
            )
        return True

    async def _index_state(self) -> IndexState:
        """``POST /collections/{c}/points/count`` (exact), and the HNSW settings of the
        collection's info."""
        _, counted = await self._ask(self._post(f"{self._url}/points/count", {"exact": True}))
        try:
            count = counted["result"]["count"]
        except (KeyError, TypeError):
            raise QueryFailed(
                "bad_response", "qdrant's count answered without result.count"
            ) from None
        if not isinstance(count, int) or isinstance(count, bool):
            raise QueryFailed("bad_response", f"qdrant's count is not a number: {count!r}")
        info = await self._fetch_json(self._url)
        hnsw = (
            info.get("result", {}).get("config", {}).get("hnsw_config")
            if isinstance(info, dict)
            else None
        )
        settings = (
            {
                f"hnsw.{k}": v
                for k, v in sorted(hnsw.items())
                if isinstance(v, str | int | float | bool)
            }
            if isinstance(hnsw, dict)
            else {}
        )
        return IndexState(count, settings or None)

    async def _list_names(self) -> list[str]:
        listed = await self._fetch_json(self._collections_url)
        return [c["name"] for c in listed["result"]["collections"]]

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        body: dict[str, Any] = {
            "query": list(vector or ()),
            "limit": k,
            "with_payload": self._payload,
        }
        if self._config.using is not None:
            body["using"] = self._config.using
        return self._post(f"{self._url}/points/query", body)

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``POST /collections/{c}/points`` by point id, or a scroll filtered on the payload."""
        if self._config.id != "id" and self._payload is False:
            return None  # an id: read from elsewhere in the point cannot be looked up
        await self._look_up_once()
        if self._payload is False:
            # A point id is an unsigned integer or a UUID; any other id cannot be one.
            return set(ids) - await self._held_points(list(_point_keys(ids).values()))
        assert isinstance(self._payload, list)  # [the payload field], False above
        field = self._payload[0]

        async def page(batch: list[str]) -> tuple[set[str], bool]:
            body = {
                "filter": _any_of(field, batch),
                "limit": PAGE,
                "with_payload": [field],
                "with_vector": False,
            }
            _, got = await self._ask(self._post(f"{self._url}/points/scroll", body))
            result = got.get("result") if isinstance(got, dict) else None
            points = result.get("points") if isinstance(result, dict) else None
            if not isinstance(result, dict) or not isinstance(points, list):
                raise QueryFailed("bad_response", "qdrant's scroll answered without points")
            values = (scalar(self._id(point)) for point in points)
            return {v for v in values if v is not None}, result.get("next_page_offset") is None

        return await missing_in_batches(ids, lambda batch: held_by_filter(batch, page))

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """The same query restricted to ``ids`` (``has_id``, or ``match any`` on the payload
        field) with ``params: {exact: true}``: Qdrant scores every point that passes the
        filter, by the collection's own distance; an id's first point is its best."""
        if self._config.id != "id" and self._payload is False:
            return None
        await self._look_up_once()
        if self._payload is False:
            keys = _point_keys(ids)
            asked = list(keys)

            def only(batch: list[str]) -> dict[str, Any]:
                return {"must": [{"has_id": [keys[i] for i in batch]}]}
        else:
            assert isinstance(self._payload, list)  # [the payload field], False above
            field = self._payload[0]
            asked = ids

            def only(batch: list[str]) -> dict[str, Any]:
                return _any_of(field, batch)

        async def page(batch: list[str]) -> tuple[list[tuple[str, float]], bool]:
            body: dict[str, Any] = {
                "query": vector,
                "filter": only(batch),
                "params": {"exact": True},
                "limit": PAGE,
                "with_payload": self._payload,
            }
            if self._config.using is not None:
                body["using"] = self._config.using
            _, got = await self._ask(self._post(f"{self._url}/points/query", body))
            points = self._results(got)
            if not isinstance(points, list):
                raise QueryFailed("bad_response", "qdrant's exact query answered without points")
            ranked = []
            for point in points:
                doc = scalar(self._id(point))
                if doc is not None:
                    ranked.append((doc, score_of(point.get("score"))))
            return ranked, len(points) < PAGE

        return await best_by_filter(asked, page)

    async def _held_points(self, keys: list[int | str]) -> set[str]:
        """Which of the point ids ``keys`` the collection holds, as the search prints them."""
        held: set[str] = set()
        for start in range(0, len(keys), BATCH):
            body = {"ids": keys[start : start + BATCH], "with_payload": False, "with_vector": False}
            _, got = await self._ask(self._post(f"{self._url}/points", body))
            points = got.get("result") if isinstance(got, dict) else None
            if not isinstance(points, list):
                raise QueryFailed("bad_response", "qdrant's retrieve answered without result")
            held |= {str(p["id"]) for p in points if isinstance(p, dict) and "id" in p}
        return held


def _point_keys(ids: list[str]) -> dict[str, int | str]:
    """The ids that can be point ids (an unsigned integer or a UUID), each as Qdrant takes it."""
    keys: dict[str, int | str] = {str(i): i for i in integers(ids) if 0 <= i <= MAX_UINT64}
    keys.update((i, i) for i in uuids(ids))
    return keys


def _any_of(field: str, ids: list[str]) -> dict[str, Any]:
    """A filter on ``field`` equal to one of ``ids``, as keywords or as integers."""
    conditions = [{"key": field, "match": {"any": ids}}]
    numbers = integers(ids)
    if numbers:
        conditions.append({"key": field, "match": {"any": numbers}})
    return {"should": conditions}
