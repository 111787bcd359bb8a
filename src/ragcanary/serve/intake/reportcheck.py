"""What a failure report may hold: its fields, their bounds, text a database can store; redacted.

A report is refused (400, the field named) for a NUL character, which PostgreSQL cannot store
in text, and for half of a UTF-16 surrogate pair, what JavaScript sends after cutting a string
inside an emoji: neither driver can encode it, and JSON and HTML cannot carry it. Taken, one
NUL once failed every later batch of reports on PostgreSQL, and one half pair every reader.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ragcanary.serve.intake.pii import Redactor
from ragcanary.serve.metrics.families import CANDIDATE_SIGNALS
from ragcanary.serve.service import Refused
from ragcanary.store.candidates import FailureReport

SIGNALS = CANDIDATE_SIGNALS
MAX_QUERY_CHARS = 2_000
MAX_IDS = 100
MAX_ID_CHARS = 512
MAX_NOTE_CHARS = 1_000
MAX_SOURCE_CHARS = 200
_FIELDS = ("query", "signal", "target", "ids", "note", "source")
_TRAILING = re.compile(r"[\s?!.,;:]+$")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def normalised(query: str) -> str:
    """The form two reports of one question share: NFKC, case-folded, spaces collapsed, no
    trailing punctuation."""
    text = unicodedata.normalize("NFKC", query).casefold()
    return _TRAILING.sub("", " ".join(text.split()))


def query_key(query: str) -> str:
    return hashlib.sha256(normalised(query).encode("utf-8")).hexdigest()


def check(body: Any, targets: Sequence[str], redact: Redactor, now: datetime) -> FailureReport:
    """The report in ``body`` (parsed JSON), bounded and redacted; ``Refused`` (400) if not."""
    if not isinstance(body, Mapping):
        raise Refused(400, 'send a JSON object like {"query": ..., "signal": ...}', "invalid")
    unknown = sorted(set(body) - set(_FIELDS))
    if unknown:
        raise Refused(400, f"unknown field {unknown[0]!r}; known: {', '.join(_FIELDS)}", "invalid")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise Refused(400, "query: a non-empty string is required", "invalid")
    if len(query) > MAX_QUERY_CHARS:
        reason = f"query: {len(query)} characters, more than {MAX_QUERY_CHARS}"
        raise Refused(400, reason, "too_large")
    storable("query", query)
    signal = body.get("signal")
    if signal not in SIGNALS:
        raise Refused(400, f"signal: one of {', '.join(SIGNALS)}, not {signal!r}", "invalid")
    target = _text(body, "target", MAX_SOURCE_CHARS)
    if target is not None and target not in targets:
        known = ", ".join(targets) or "none configured"
        raise Refused(400, f"target: {target!r} is not configured (known: {known})", "invalid")
    ids = body.get("ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise Refused(400, "ids: a list of strings (what the application retrieved)", "invalid")
    if len(ids) > MAX_IDS or any(len(i) > MAX_ID_CHARS for i in ids):
        reason = f"ids: at most {MAX_IDS}, each at most {MAX_ID_CHARS} characters"
        raise Refused(400, reason, "too_large")
    if _UNSTORABLE.search("".join(ids)):  # one pass for them all; then find which
        for n, one in enumerate(ids):
            storable(f"ids[{n}]", one)
    note = _text(body, "note", MAX_NOTE_CHARS)
    source = _text(body, "source", MAX_SOURCE_CHARS)
    clean = redact(query.strip())
    return FailureReport(
        key=query_key(clean),
        query=clean,
        signal=signal,
        at=now,
        target=target,
        ids=tuple(ids),  # a document's id is what the application got back: never rewritten
        note=redact(note) if note is not None else None,
        source=redact(source) if source is not None else None,
    )


def storable(name: str, value: str) -> None:
    """Refuse ``value`` of field ``name`` if it holds text no database can store (see the
    module): the first such character, where it is, and what to send instead."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return
    at = found.start() + 1
    if found.group() == "\x00":
        reason = (
            f"{name}: a NUL character (U+0000) at character {at}, which cannot be stored; remove it"
        )
    else:
        reason = (
            f"{name}: half of a UTF-16 surrogate pair (U+{ord(found.group()):04X}) at character "
            f"{at}, not a whole character: a string was cut inside one (an emoji?); cut "
            "strings between characters (code points), not between UTF-16 units"
        )
    raise Refused(400, reason, "invalid")


def _text(body: Mapping[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Refused(400, f"{name}: a string", "invalid")
    if len(value) > limit:
        raise Refused(400, f"{name}: more than {limit} characters", "too_large")
    storable(name, value)
    return value
