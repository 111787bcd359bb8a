"""What a store remembers of the rankings it has read, by ranking number.

A ranking never changes once stored and its number is never given to another
(``store.shared``), so what was made of it once (a history's view of it, its case entry) is
still right when another run names it; a pruned ranking is named by no remaining run. Runs of
a pair mostly repeat the rankings of the runs before them, and every run is compared with
the same pinned baseline: docs/performance.md, "Storage: one canary's history" and "Web
pages".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Generic, TypeVar

V = TypeVar("V")


class Remembered(Generic[V]):
    """Values made of rankings, at most ``limit`` of them (all forgotten when more come).

    Shared by a store's threads: each key is read once per call, and two threads making the
    same value at once both make it right.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._values: dict[int, V] = {}

    def read(
        self, keys: Collection[int], make: Callable[[set[int]], Mapping[int, V]]
    ) -> dict[int, V]:
        """The values of ``keys``: those remembered, and what ``make`` makes of the others."""
        values = self._values
        found = {key: value for key in keys if (value := values.get(key)) is not None}
        missing = set(keys) - found.keys()
        if missing:
            new = make(missing)
            found.update(new)
            if len(values) + len(new) > self._limit:
                values.clear()
            if len(new) <= self._limit:
                values.update(new)
        return found
