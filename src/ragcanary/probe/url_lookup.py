"""The generic target's look-up: one GET per id of its ``lookup:`` URL; 200 held, 404 gone.

Anything else (another status, a timeout, a refused connection) says nothing of the id, and so
nothing of the others either: the whole look-up is "cannot tell", never a guess. Only the ids
that left their canary's top-k are asked in a run, so one request per id stays cheap; a
look-up of more than ``MAX_LOOKUP_IDS`` (``validate --live`` and the daemon's periodic check
ask about every relevant id of the suites) is refused rather than left to run for minutes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import quote

from ragcanary.config.lookup import ID
from ragcanary.probe.retries import QueryFailed

MAX_LOOKUP_IDS = 1000
HELD, GONE = 200, 404

# The status of a GET of one URL: HELD or GONE, else it raises ``QueryFailed``.
Status = Callable[[str], Awaitable[int]]


def lookup_url(template: str, doc_id: str) -> str:
    """The template with ``doc_id`` in place of ``{id}``, percent-encoded whole (a ``/``, ``?``
    or ``#`` in an id stays inside its path segment or query value)."""
    return template.replace(ID, quote(doc_id, safe=""))


async def missing_by_url(ids: Sequence[str], template: str, status: Status) -> set[str]:
    """The ids whose URL answered 404, asked one at a time; raises ``QueryFailed`` when there
    are too many to ask or when one answer is neither 200 nor 404."""
    if len(ids) > MAX_LOOKUP_IDS:
        raise QueryFailed(
            "bad_response", f"{len(ids)} ids to look up, more than {MAX_LOOKUP_IDS} at once"
        )
    missing = set()
    for doc_id in ids:
        code = await status(lookup_url(template, doc_id))
        if code == GONE:
            missing.add(doc_id)
        elif code != HELD:
            raise QueryFailed("bad_response", f"lookup answered HTTP {code}, not 200 or 404")
    return missing
