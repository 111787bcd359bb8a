"""A vector database target that looks its collection up before the first query."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

# Names of existing collections a "not found" message lists at most.
SHOWN_COLLECTIONS = 20


class CollectionTarget(HttpTarget):
    """Queries by vector a collection it looks up once, and again after a 4xx (recreated?).

    Subclasses say how to look it up (``_lookup``), how to list the collections a "not
    found" should name (``_list_names``), and build the query (``_request``).
    """

    def _setup(self, config: TargetConfig) -> None:
        assert config.collection is not None  # the config model requires it for a preset
        self._collection = config.collection
        self._found: Any = None  # what the lookup learned; None until it succeeded
        self._looking = asyncio.Lock()

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The collection's ``k`` nearest to ``vector``, best first."""
        started = self._clock()
        if vector is None:
            reason = f"the {self._config.preset} preset queries by vector: set embedding:"
            return Answer((), (), 0.0, "bad_response", reason)
        try:
            await self._look_up_once()
        except QueryFailed as failure:
            reason = self._redact(failure.reason)
            return Answer((), (), self._clock() - started, failure.outcome, reason)
        answer = await super().search(query, k, vector)
        if answer.outcome == "http_4xx":
            self._found = None  # recreated under the same name: look it up again
        return answer

    async def _look_up_once(self) -> Any:
        """What the lookup learned, looked up first if not yet; raises ``QueryFailed``."""
        async with self._looking:
            if self._found is None:
                self._found = await self._lookup()
            return self._found

    async def _lookup(self) -> Any:
        raise NotImplementedError

    async def _list_names(self) -> list[str]:
        raise NotImplementedError

    async def _lookup_json(self, url: str, where: str = "") -> Any:
        """``_fetch_json``, with a 404 said as "not found" naming the collections there."""
        try:
            return await self._fetch_json(url)
        except QueryFailed as failure:
            if failure.outcome == "http_4xx" and " 404 " in f" {failure.reason} ":
                raise QueryFailed("http_4xx", await self._not_found(where)) from failure
            raise

    async def _not_found(self, where: str) -> str:
        message = f"collection {self._collection!r} not found" + (f" in {where}" if where else "")
        try:
            names = sorted(await self._list_names())
        except QueryFailed as failure:
            if failure.outcome == "http_4xx" and " 404 " in f" {failure.reason} ":
                # Nothing at all under this url: a path before the API's (a proxy's prefix?).
                return (
                    f"{message}, and the list of collections answered HTTP 404 too: check that "
                    f"url: is the server's root ({self._config.url})"
                )
            return f"{message}; check collection:"
        except (ValueError, TypeError, KeyError, AttributeError):
            return f"{message}; check collection:"
        if not names:
            return f"{message}, where there are no collections"
        return f"{message}; set collection: to {one_of(names)}"

    def _post(self, url: str, body: Any) -> httpx.Request:
        return self._client.build_request("POST", url, json=body, headers=self._headers)


def one_of(names: Sequence[str]) -> str:
    """``one of a, b and 3 more``: what a "not found" message offers instead, sorted."""
    ordered = sorted(names)
    shown = ", ".join(ordered[:SHOWN_COLLECTIONS])
    more = len(ordered) - SHOWN_COLLECTIONS
    return f"one of {shown}" + (f" and {more} more" if more > 0 else "")
