"""A real HTTP retriever on 127.0.0.1 that fails, at random or on demand, in every way targets do.

``POST /search`` with ``{"q": query, "k": int}`` answers ``{"hits": [{"id": .., "score": ..}]}``
from its corpus when the request draws the ``ok`` mode. The other modes are the failures the
daemon must survive, each a query outcome of docs/report.md:

=============  ==========================================================  =================
mode           what the client gets                                        expected outcome
=============  ==========================================================  =================
ok             the correct hits (an empty list when the corpus has none)   ok (or empty)
http_500       500 with a JSON error body                                  http_5xx
rate_limited   429 with ``Retry-After: 1``                                 rate_limited
html           200 with an HTML error page                                 bad_response
truncated      200 with JSON cut off in the middle                         bad_response
wrong_type     200, the top hit's score is a string                        bad_response
missing_field  200, the top hit has no id                                  bad_response
empty          200 with an empty list of hits                              empty
huge           200 with a 50 MB body and no Content-Length                 bad_response
gzip_bomb      200 with a 50 MB body gzipped to 50 kB                      bad_response
drip           200, then one byte every 0.1 s for three times the timeout  timeout
hang           nothing at all for three times the timeout                  timeout
=============  ==========================================================  =================

Each request draws its mode from ``weights`` with a seeded generator; ``per_query`` forces a
mode for given queries. Every request is recorded as it arrives, with its mode, so tests can
compare what the daemon counted and stored with what was really served; ``most_in_flight``
says how many requests it ever answered at once.
"""

from __future__ import annotations

import json
import random
import threading
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, Literal, get_args

from retrievers import ServerThread

Mode = Literal[
    "ok",
    "http_500",
    "rate_limited",
    "html",
    "truncated",
    "wrong_type",
    "missing_field",
    "empty",
    "huge",
    "gzip_bomb",
    "drip",
    "hang",
]
MODES: tuple[Mode, ...] = get_args(Mode)
# The query outcome (ragcanary.measure.results.Outcome) each mode must be counted under.
EXPECTED_OUTCOME: dict[Mode, str] = {
    "ok": "ok",
    "http_500": "http_5xx",
    "rate_limited": "rate_limited",
    "html": "bad_response",
    "truncated": "bad_response",
    "wrong_type": "bad_response",
    "missing_field": "bad_response",
    "empty": "empty",
    "huge": "bad_response",
    "gzip_bomb": "bad_response",
    "drip": "timeout",
    "hang": "timeout",
}
HUGE_BYTES = 50 * 1024 * 1024
_CHUNK = b" " * 65536
_DRIP_EVERY_S = 0.1
_GZIP = ("Content-Encoding", "gzip")
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}  # deflate means zlib format
_HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


@cache
def _gzip_bomb() -> bytes:
    """A JSON document of ``HUGE_BYTES`` gzipped (to about 50 kB), built without holding it."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(b'{"hits": [')]
    parts += [packer.compress(_CHUNK) for _ in range(HUGE_BYTES // len(_CHUNK))]
    parts += [packer.compress(b"]}"), packer.flush()]
    return b"".join(parts)


@dataclass(frozen=True)
class Served:
    """One request as it arrived: what it asked and the mode it drew."""

    query: str
    mode: Mode


@dataclass
class FaultyRetriever:
    """A threaded HTTP retriever whose every answer may be one of the failures in ``MODES``.

    ``corpus`` maps a query to its ranked ``(id, score)`` list. ``timeout_s`` is the client's
    timeout, so that ``drip`` and ``hang`` outlast it. Change ``weights``, ``per_query`` and
    ``delay_s`` (added to every answer) and ``encoding`` (``gzip`` or ``deflate`` compresses
    the correct answers; any other value is only announced) while it runs. Use it as a context
    manager; ``url`` is known once entered.
    """

    corpus: Mapping[str, list[tuple[str, float]]]
    timeout_s: float
    weights: Mapping[Mode, float] = field(default_factory=lambda: {"ok": 1.0})
    per_query: dict[str, Mode] = field(default_factory=dict)
    delay_s: float = 0.0
    encoding: str | None = None
    seed: int = 0
    served: list[Served] = field(default_factory=list)
    most_in_flight: int = 0
    _in_flight: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _closing: threading.Event = field(default_factory=threading.Event, repr=False)
    _serving: ServerThread | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def url(self) -> str:
        assert self._serving is not None, "enter the FaultyRetriever first"
        host, port = self._serving.address
        return f"http://{host!s}:{port}/search"

    def target_entry(self, **overrides: Any) -> dict[str, Any]:
        """A config file's target entry that maps this retriever's API."""
        return {
            "url": self.url,
            "method": "POST",
            "body": {"q": "{query}", "k": "{k}"},
            "results": "hits",
            "id": "id",
            "score": "score",
            "timeout": self.timeout_s,
            **overrides,
        }

    def served_modes(self) -> Counter[Mode]:
        """How many requests drew each mode so far."""
        with self._lock:
            return Counter(s.mode for s in self.served)

    def expected_outcomes(self) -> Counter[tuple[str, str]]:
        """How many requests so far must be counted under each (query, outcome)."""
        expected: Counter[tuple[str, str]] = Counter()
        with self._lock:
            for s in self.served:
                outcome = EXPECTED_OUTCOME[s.mode]
                if outcome == "ok" and not self.corpus.get(s.query):
                    outcome = "empty"  # a correct answer with nothing in it
                expected[(s.query, outcome)] += 1
        return expected

    def _draw(self, query: str) -> Mode:
        if query in self.per_query:
            return self.per_query[query]
        modes = list(self.weights)
        with self._lock:
            return self._rng.choices(modes, weights=[self.weights[m] for m in modes])[0]

    def _enter(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def __enter__(self) -> FaultyRetriever:
        # Built once per process (about 0.5 s), before any client's timeout is running: built
        # in a handler, on a loaded machine, it outlasted the 0.5 s the fault test allows.
        _gzip_bomb()
        self._serving = ServerThread(_handler_for(self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._serving is not None
        self._closing.set()  # ends every drip and hang still going
        self._serving.stop()


def _handler_for(retriever: FaultyRetriever) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                query = str(json.loads(raw)["q"])
            except (ValueError, KeyError, TypeError):
                query = ""
            mode = retriever._draw(query)
            retriever._enter(Served(query, mode))
            try:
                if retriever.delay_s and retriever._closing.wait(retriever.delay_s):
                    return
                self._answer(mode, retriever.corpus.get(query, []))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (timeout, size cap), as tested
            finally:
                retriever._leave()

        def _answer(self, mode: Mode, ranked: list[tuple[str, float]]) -> None:
            hits: list[dict[str, Any]] = [{"id": d, "score": s} for d, s in ranked]
            if mode == "ok":
                return self._send_encoded({"hits": hits})
            if mode == "http_500":
                return self._send(500, {"error": "internal error"})
            if mode == "rate_limited":
                return self._send(429, {"error": "slow down"}, ("Retry-After", "1"))
            if mode == "html":
                return self._send_bytes(200, _HTML, "text/html")
            if mode == "truncated":
                whole = json.dumps({"hits": hits or [{"id": "x", "score": 1.0}]}).encode()
                return self._send_bytes(200, whole[: len(whole) // 2])
            if mode == "wrong_type":
                return self._send(200, {"hits": [{"id": "x", "score": "0.9"}, *hits]})
            if mode == "missing_field":
                return self._send(200, {"hits": [{"score": 0.99}, *hits]})
            if mode == "empty":
                return self._send(200, {"hits": []})
            if mode == "huge":
                return self._stream_huge()
            if mode == "gzip_bomb":
                return self._send_bytes(200, _gzip_bomb(), "application/json", _GZIP)
            if mode == "drip":
                return self._drip()
            retriever._closing.wait(3 * retriever.timeout_s)  # hang: say nothing at all
            self.close_connection = True

        def _send(self, status: int, payload: Any, *header: tuple[str, str]) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), "application/json", *header)

        def _send_encoded(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            encoding = retriever.encoding
            if encoding is None:
                return self._send_bytes(200, data)
            if encoding in _WBITS:
                packer = zlib.compressobj(6, zlib.DEFLATED, _WBITS[encoding])
                data = packer.compress(data) + packer.flush()
            return self._send_bytes(200, data, "application/json", ("Content-Encoding", encoding))

        def _send_bytes(
            self,
            status: int,
            data: bytes,
            content_type: str = "application/json",
            *headers: tuple[str, str],
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream_huge(self) -> None:
            # No Content-Length: the client can only stop reading at its own cap.
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"hits": [')
            for _ in range(HUGE_BYTES // len(_CHUNK)):
                if retriever._closing.is_set():
                    return
                self.wfile.write(_CHUNK)
            self.wfile.write(b"]}")

        def _drip(self) -> None:
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            deadline = time.monotonic() + 3 * retriever.timeout_s
            while time.monotonic() < deadline and not retriever._closing.wait(_DRIP_EVERY_S):
                self.wfile.write(b" ")
                self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
