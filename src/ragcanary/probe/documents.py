"""Documents' text by id, for a judge: the generic target's ``fetch:`` URL, one GET per id.

A 404 leaves the id out (the index no longer holds it: nothing to grade); any other failure
raises ``QueryFailed`` and the target answers "cannot tell" for the whole batch. Texts are
cut to ``MAX_TEXT_CHARS``: a judge reads the start of a document, and a page of thousands of
documents must not hold megabytes of each.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ragcanary.config.fetch import fetch_url
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.templates import compile_path

MAX_TEXT_CHARS = 20_000
MAX_FETCH_IDS = 1000
GONE = 404

# The status and JSON answer of a GET of one URL (a 404 is an answer).
Get = Callable[[str], Awaitable[tuple[int, Any]]]


def cut(text: str) -> str:
    """``text`` within ``MAX_TEXT_CHARS``."""
    return text[:MAX_TEXT_CHARS]


async def texts_by_url(
    ids: Sequence[str], template: str, text_path: str, get: Get
) -> dict[str, str]:
    """Each id's text at ``text_path`` of the JSON its URL answers; ids answered 404, or
    whose text is not a string, are left out."""
    if len(ids) > MAX_FETCH_IDS:
        raise QueryFailed(
            "bad_response", f"{len(ids)} documents to fetch, more than {MAX_FETCH_IDS}"
        )
    text_of = compile_path(text_path)
    found: dict[str, str] = {}
    for doc_id in ids:
        status, answer = await get(fetch_url(template, doc_id))
        if status == GONE:
            continue
        text = text_of(answer)
        if isinstance(text, str) and text.strip():
            found[doc_id] = cut(text)
    return found
