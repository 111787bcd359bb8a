"""Naming a stored run by its whole id or by a unique prefix of it, as `ragcanary run` prints.

Every command and API parameter that takes a run id resolves it here, on SQLite and
PostgreSQL alike: a whole id is itself; else a prefix of at least ``MIN_PREFIX`` characters
names the one run whose id begins with it. Ids are compared exactly (case included), and a
prefix that more than one run begins with is an error listing them, never a guess.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from ragcanary.store.errors import AmbiguousRun, UnknownRun
from ragcanary.store.schema import runs
from ragcanary.store.storage import Store

MIN_PREFIX = 8  # characters: what `run` prints (12) and git's habit (7) both clear it
SHOWN = 10  # candidates an ambiguous prefix lists
_PICK = "pick one from `ragcanary runs` or GET /api/v1/runs"


def resolve_run_id(store: Store, given: str) -> str:
    """The whole id of the stored run ``given`` names: its id, or a unique prefix of it."""
    if not _storable(given):
        raise UnknownRun(f"run {given}: no such run in storage; {_PICK}")
    with store.reading() as conn:
        if conn.execute(select(runs.c.run_id).where(runs.c.run_id == given)).first():
            return given
        if len(given) < MIN_PREFIX:
            raise UnknownRun(
                f"run {given}: no such run in storage; a shortened run id needs at least "
                f"{MIN_PREFIX} characters; {_PICK}"
            )
        found = conn.execute(_starting_with(given, store.dialect).limit(SHOWN + 1)).all()
    if not found:
        raise UnknownRun(f"run {given}: no such run in storage; {_PICK}")
    if len(found) == 1:
        return str(found[0].run_id)
    shown = found[:SHOWN]
    listed = "; ".join(_candidate(row) for row in shown)
    count = f"more than {SHOWN}" if len(found) > SHOWN else str(len(found))
    more = "; and more" if len(found) > SHOWN else ""
    raise AmbiguousRun(
        f"run {given}: ambiguous, {count} stored runs start with it: {listed}{more}; give more "
        "of the id",
        [str(row.run_id) for row in shown],
    )


def _starting_with(prefix: str, dialect: str) -> Any:
    """The runs whose id begins with ``prefix``, in id order."""
    query = (
        select(runs.c.run_id, runs.c.suite, runs.c.target, runs.c.started_at)
        # autoescape: a % or _ in the prefix is that character, not a LIKE wildcard.
        .where(runs.c.run_id.startswith(prefix, autoescape=True))
        .order_by(runs.c.run_id)
    )
    if dialect == "sqlite":
        # SQLite's LIKE ignores case and cannot use the key's index; the ids between the prefix
        # and the prefix with its last character raised are exactly those that begin with it
        # (the key compares bytes, in code point order), read off the index.
        query = query.where(runs.c.run_id >= prefix)
        following = ord(prefix[-1]) + 1
        if 0xD800 <= following < 0xE000:  # surrogates are no characters: skip them
            following = 0xE000
        if following <= 0x10FFFF:
            query = query.where(runs.c.run_id < prefix[:-1] + chr(following))
    return query


def _candidate(row: Any) -> str:
    started = row.started_at.isoformat(timespec="seconds")
    return f"{row.run_id} (suite {row.suite} on target {row.target}, started {started})"


def _storable(given: str) -> bool:
    """Whether a run could have the id ``given``: stored ids are UTF-8 text without NUL
    (an argument of undecodable bytes reaches Python as lone surrogates)."""
    if not given or "\x00" in given:
        return False
    try:
        given.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
