"""Reading a retriever's answer within a cap, and short, redacted words for what went wrong."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ragcanary.probe.retries import QueryFailed

# Text is cut for a message only after secrets are hidden in this much of it: a secret cut
# in half first would no longer be recognised, and its first half would be shown.
_SECRET_WINDOW = 4096
# Only what _read_decoded inflates within its cap: httpx would inflate a whole network chunk
# at once, and 64 kB of gzip can hold 64 MB.
ACCEPT_ENCODING = "gzip, deflate"
_INFLATE_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 0}


class TooDeep(ValueError):
    """A JSON body nested deeper than the decoder follows: not an answer, and no crash."""

    def __init__(self) -> None:
        super().__init__("JSON nested deeper than the JSON decoder follows")


def decode_json(body: bytes | str) -> Any:
    """``json.loads`` for a body that came over the network: ``ValueError`` for anything that
    cannot be read, ``TooDeep`` for nesting deep enough to exhaust the decoder's recursion
    (which ``json`` raises as a ``RecursionError`` that a caller would not expect)."""
    try:
        return json.loads(body)
    except RecursionError:
        raise TooDeep() from None


def not_json(exc: ValueError, body: bytes, hide: Callable[[str], str]) -> str:
    """Why ``body`` is no JSON answer, for a reason: too deep, or what it starts with."""
    return str(exc) if isinstance(exc, TooDeep) else preview(body, hide)


class TooLarge(QueryFailed):
    """The answer is larger than the configured cap; nothing past the cap was read."""

    def __init__(self, reason: str) -> None:
        super().__init__("bad_response", reason)


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The decoded body, refusing (and no longer reading) anything above ``limit`` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"response larger than {limit} bytes (Content-Length {declared})")
    body, whole = await _read_decoded(response, limit)
    if not whole:
        raise TooLarge(f"response larger than {limit} bytes")
    return body


async def _read_decoded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the decoded body, and whether that is all of it.

    The body is inflated here rather than by httpx, never more than one byte past ``limit``,
    so a small compressed body cannot expand to gigabytes in memory.
    """
    if response.is_stream_consumed:
        # A transport that read the body already (httpx.MockTransport): it is decoded and held.
        held = response.content
        return held[:limit], len(held) <= limit
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    inflater = None
    if encoding not in ("", "identity"):
        if encoding not in _INFLATE_WBITS:
            raise QueryFailed("bad_response", f"unsupported Content-Encoding {encoding[:40]!r}")
        # deflate: wbits 0 takes the window size from the zlib header.
        inflater = zlib.decompressobj(_INFLATE_WBITS[encoding])
    body = bytearray()
    # The body's stream itself: aiter_raw's layers over it (a chunker, a context, a byte count)
    # took 2% of our CPU per query, and the caller closes the response.
    stream = response.stream
    chunks = stream if isinstance(stream, httpx.AsyncByteStream) else response.aiter_raw()
    async for chunk in chunks:
        room = limit + 1 - len(body)
        try:
            body += inflater.decompress(chunk, room) if inflater is not None else chunk[:room]
        except zlib.error as exc:
            raise QueryFailed(
                "bad_response", f"cannot decompress the {encoding} body: {exc}"
            ) from exc
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


async def error_snippet(
    response: httpx.Response,
    hide: Callable[[str], str],
    read: Callable[[Any], str | None] = lambda error: None,
) -> str:
    """The start of an error body, one line, so a 400 can say which field the target disliked.

    ``read`` may find the message in a JSON body; then that is shown, at greater length.
    """
    try:
        head, _ = await _read_decoded(response, _SECRET_WINDOW)
    except QueryFailed:
        return ""
    try:
        message = read(decode_json(head))
    except ValueError:
        message = None
    if message:
        return _excerpt(" ".join(message.split()), 300, hide)
    text = " ".join(head.decode("utf-8", "replace").split())
    if text.startswith("<"):
        return "(an HTML page)"
    return _excerpt(text, 120, hide)


def preview(body: bytes, hide: Callable[[str], str]) -> str:
    text = " ".join(body[:_SECRET_WINDOW].decode("utf-8", "replace").split())
    if not text:
        return "the body is empty"
    if text.startswith("<"):
        return f"it looks like HTML ({_excerpt(text, 40, hide)!r})"
    return f"it starts with {_excerpt(text, 40, hide)!r}"


def holding(keys: Sequence[str], what: str) -> str:
    """``the answer holds the keys data, took``: what an answer the paths missed does hold."""
    verb = "hold" if what.endswith("s") else "holds"
    if not keys:
        return f"{what} {verb} no keys (no JSON object)"
    return f"{what} {verb} the keys {', '.join(keys)}"


def show(value: Any, hide: Callable[[str], str]) -> str:
    """A short JSON rendering of a value for an error message."""
    return _excerpt(json.dumps(value, ensure_ascii=False, default=str), 40, hide)


def _excerpt(text: str, limit: int, hide: Callable[[str], str]) -> str:
    """At most ``limit`` characters of ``text``, secrets hidden before it is cut."""
    shown = hide(text[: limit + _SECRET_WINDOW])
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def kind(exc: BaseException) -> str:
    return "overall deadline" if isinstance(exc, TimeoutError) else type(exc).__name__


def describe(exc: BaseException, hide: Callable[[str], str]) -> str:
    text = first_line(exc, hide)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def first_line(exc: BaseException, hide: Callable[[str], str] = str) -> str:
    lines = str(exc).strip().splitlines()
    return _excerpt(lines[0], 200, hide) if lines else ""
