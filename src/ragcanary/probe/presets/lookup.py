"""Which relevant ids an index still holds: ids asked in batches, filters narrowed until done.

A preset whose ``id:`` is the record's own key fetches the records by key (``held`` answers
which of a batch exist). One whose ``id:`` is a field in the payload filters on that field:
a document has many chunks, so each page of matches may hold only some of the ids, and the
next page asks only for those not seen yet, until a page holds every match there is. An exact
search restricted to the ids pages the same way (``best_by_filter``): its hits come best first.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

from ragcanary.probe.retries import QueryFailed

BATCH = 100  # ids per lookup request
PAGE = 1000  # matches per page of a filter on a payload field
MAX_PAGES = 20  # pages per batch before "cannot tell"
MAX_UINT64 = 2**64 - 1

Held = Callable[[list[str]], Awaitable[set[str]]]
# The values of the field among one page of matches, and whether the page held all of them.
Page = Callable[[list[str]], Awaitable[tuple[set[str], bool]]]


async def missing_in_batches(ids: Sequence[str], held: Held, size: int = BATCH) -> set[str]:
    """The ids that ``held``, asked ``size`` ids at a time, does not say the index holds."""
    missing: set[str] = set()
    for start in range(0, len(ids), size):
        batch = list(ids[start : start + size])
        missing |= set(batch) - await held(batch)
    return missing


async def held_by_filter(ids: list[str], page: Page) -> set[str]:
    """The ids a filter on their field finds, asking again for the ones not seen yet.

    Raises ``QueryFailed`` when a full page brings no new id (chunks of other values that
    the filter also matched, a field the engine tokenizes) or after ``MAX_PAGES``.
    """
    wanted = set(ids)
    found: set[str] = set()
    for _ in range(MAX_PAGES):
        seen, whole = await page(sorted(wanted - found))
        new = (seen & wanted) - found
        found |= new
        if whole or found == wanted:
            return found
        if not new:
            raise QueryFailed("bad_response", "a full page of matches held no id asked for")
    raise QueryFailed("bad_response", f"ids not all found within {MAX_PAGES} pages")


def integers(ids: Sequence[str]) -> list[int]:
    """The ids that are integers written as an integer field prints them (``7``, not ``07``)."""
    found = []
    for doc_id in ids:
        if doc_id.isascii() and doc_id.lstrip("-").isdigit() and str(int(doc_id)) == doc_id:
            found.append(int(doc_id))
    return found


def uuids(ids: Sequence[str]) -> list[str]:
    """The ids that are UUIDs as databases print them: lower case, with hyphens."""
    found = []
    for doc_id in ids:
        try:
            if str(uuid.UUID(doc_id)) == doc_id:
                found.append(doc_id)
        except ValueError:
            pass
    return found


def scalar(value: object) -> str | None:
    """A field's value as the id a search reads from it (a string or integer), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return str(value)


# One page of an exact search restricted to some ids: (id, score) of its hits, best first,
# and whether the page held all of them.
RankedPage = Callable[[list[str]], Awaitable[tuple[list[tuple[str, float]], bool]]]


async def best_by_filter(ids: Sequence[str], page: RankedPage) -> dict[str, float]:
    """Each held id's best score from an exact search restricted to ``ids``, asked in batches.

    The hits come best first, so an id's first hit is its best chunk; a full page asks again
    only for the ids it did not show (``held_by_filter``), whose chunks all rank among the
    next search's. Ids the search does not find are left out.
    """
    best: dict[str, float] = {}

    async def seen(batch: list[str]) -> tuple[set[str], bool]:
        ranked, whole = await page(batch)
        asked = set(batch)
        for doc, score in ranked:
            if doc in asked:
                best.setdefault(doc, score)
        return {doc for doc, _ in ranked}, whole

    await missing_in_batches(ids, lambda batch: held_by_filter(batch, seen))
    return best


def score_of(value: object) -> float:
    """A hit's score as a number; raises ``QueryFailed`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryFailed("bad_response", "an exact search answered a score that is no number")
    return float(value)
