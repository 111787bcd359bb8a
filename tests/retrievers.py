"""A real HTTP retriever on 127.0.0.1 for tests, with knobs to degrade it while it runs."""

from __future__ import annotations

import hashlib
import json
import random
import ssl
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from ragcanary.config.target import TargetConfig

DEFAULT_API_KEY = "test-api-key-123"

# A small corpus the tests can share: query -> ranked (doc id, score).
CORPUS: dict[str, list[tuple[str, float]]] = {
    "reset password": [("doc-7", 0.93), ("doc-2", 0.81), ("doc-9", 0.44)],
    "pricing plans": [("doc-3", 0.88), ("doc-7", 0.52)],
    "streaming ingest": [],
}


def target_entry(url: str, key_var: str = "VENDOR_KEY", **overrides: Any) -> dict[str, Any]:
    """A config file's entry for a target mapping FakeRetriever's API, its key from ``${key_var}``.

    JSON of it is valid YAML, so config templates can embed it as a flow mapping.
    """
    return {
        "url": url,
        "method": "POST",
        "headers": {"X-Api-Key": f"${{{key_var}}}"},
        "body": {"text": "{query}", "top_k": "{k}"},
        "results": "data.matches",
        "id": "chunk.meta.parent_id",
        "score": "relevance",
        **overrides,
    }


def graded_corpus(queries: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """Ten ranked docs per query: ``rel-i`` at rank 1, 2 or 3 among ``doc-i-0`` .. ``doc-i-8``."""
    corpus = {}
    for i, query in enumerate(queries):
        docs = [f"doc-{i}-{j}" for j in range(9)]
        docs.insert(i % 3, f"rel-{i}")
        corpus[query] = [(doc, round(0.95 - r * 0.05, 4)) for r, doc in enumerate(docs)]
    return corpus


@dataclass
class Recorded:
    """One request the retriever received."""

    path: str
    headers: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    """Quiet when a client leaves mid-request (a probe giving up at its timeout, a refused
    certificate): tests do that on purpose, and socketserver would print a traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):
            super().handle_error(request, client_address)


class ServerThread:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) serving from a daemon thread."""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
    ) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        if tls is not None:  # HTTPS with this server-side context
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        """Stop serving and close the socket; requests still being handled end on their own."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@dataclass
class FakeRetriever:
    """A retriever whose API deliberately differs from the README's example target.

    ``POST /v2/query`` with ``{"text": ..., "top_k": int}`` and header ``X-Api-Key``
    answers ``{"data": {"matches": [{"chunk": {"meta": {"parent_id": id}}, "relevance": s}]}}``.
    Set the public attributes while it runs to simulate trouble: ``status`` (e.g. 503),
    ``delay_s``, ``drop_ids`` (removed documents), ``score_shift``, ``shuffle_top`` (reorder
    the top n, deterministically per query and ``seed``) and ``retry_after``.
    Use it as a context manager; ``url`` is known once entered.
    """

    corpus: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=lambda: CORPUS)
    api_key: str = DEFAULT_API_KEY
    status: int = 200
    delay_s: float = 0.0
    drop_ids: set[str] = field(default_factory=set)
    score_shift: float = 0.0
    shuffle_top: int = 0
    seed: int = 0
    retry_after: str | None = None
    requests: list[Recorded] = field(default_factory=list)
    _serving: ServerThread | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def url(self) -> str:
        assert self._serving is not None, "enter the FakeRetriever first"
        host, port = self._serving.address
        return f"http://{host!s}:{port}/v2/query"

    def target_config(self, **overrides: Any) -> TargetConfig:
        """A TargetConfig that maps this retriever's API; keyword arguments override fields."""
        fields = target_entry(self.url, timeout=5.0, retries=0)
        fields["headers"] = {"X-Api-Key": self.api_key}
        return TargetConfig(**(fields | overrides))

    def ranked(self, query: str, top_k: int) -> list[tuple[str, float]]:
        """What the retriever answers right now, after every degradation knob."""
        hits = [
            (d, s + self.score_shift)
            for d, s in self.corpus.get(query, [])
            if d not in self.drop_ids
        ]
        n = min(self.shuffle_top, len(hits))
        if n > 1:
            top = hits[:n]
            random.Random(f"{self.seed}:{query}").shuffle(top)
            if top == hits[:n]:
                top = top[1:] + top[:1]  # a shuffle that changed nothing would hide churn
            hits = top + hits[n:]
        return hits[:top_k]

    def __enter__(self) -> FakeRetriever:
        self._serving = ServerThread(_handler_for(self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._serving is not None
        self._serving.stop()

    def _record(self, entry: Recorded) -> None:
        with self._lock:
            self.requests.append(entry)


def _handler_for(retriever: FakeRetriever) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Headers and body go out in two writes; with Nagle on, each answer waits ~40 ms.
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            retriever._record(Recorded(self.path, dict(self.headers.items()), body))
            if retriever.delay_s:
                time.sleep(retriever.delay_s)  # simulated retrieval latency, in the server thread
            if self.path != "/v2/query":
                return self._send(404, {"error": "not found"})
            if self.headers.get("X-Api-Key") != retriever.api_key:
                return self._send(401, {"error": "missing or wrong X-Api-Key"})
            if retriever.status != 200:
                return self._send(retriever.status, {"error": "simulated failure"})
            if not isinstance(body, dict) or not isinstance(body.get("text"), str):
                return self._send(400, {"error": "body must be {text: str, top_k: int}"})
            top_k = body.get("top_k", 10)
            if isinstance(top_k, bool) or not isinstance(top_k, int):
                return self._send(400, {"error": "top_k must be an integer"})
            matches = [
                {"chunk": {"meta": {"parent_id": doc_id}}, "relevance": score}
                for doc_id, score in retriever.ranked(body["text"], top_k)
            ]
            return self._send(200, {"data": {"matches": matches}})

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retriever.retry_after is not None and status in (429, 503):
                self.send_header("Retry-After", retriever.retry_after)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def toy_vector(text: str, dimensions: int, model: str = "toy-1") -> list[float]:
    """A deterministic unit vector for ``text`` under ``model``: another model, another vector."""
    seed = hashlib.sha256(f"{model}\0{text}".encode()).digest()
    rng = random.Random(seed)
    raw = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(x * x for x in raw) ** 0.5
    return [round(x / norm, 8) for x in raw]


@dataclass
class EmbeddingServer:
    """An OpenAI-compatible ``POST /v1/embeddings`` on 127.0.0.1 with deterministic vectors.

    ``model`` is what it embeds with whatever the request asks (swap it to simulate a new
    model behind the same name); ``status`` other than 200 fails every request; ``raw``, when
    set, is answered as it is with 200 (a broken endpoint); ``api_key``, when set, must come as
    ``Authorization: Bearer KEY``. ``requests`` records each body.
    """

    dimensions: int = 8
    model: str = "toy-1"
    status: int = 200
    raw: bytes | None = None
    api_key: str | None = None
    requests: list[Any] = field(default_factory=list)
    _serving: ServerThread | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        assert self._serving is not None, "enter the EmbeddingServer first"
        host, port = self._serving.address
        return f"http://{host}:{port}/v1/embeddings"

    def __enter__(self) -> EmbeddingServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw)
                server.requests.append(body)
                if (
                    server.api_key
                    and self.headers.get("Authorization") != f"Bearer {server.api_key}"
                ):
                    return self._send(401, {"error": {"message": "invalid api key"}})
                if server.status != 200:
                    return self._send(server.status, {"error": {"message": "simulated"}})
                if server.raw is not None:
                    return self._send_bytes(200, server.raw)
                size = body.get("dimensions") or server.dimensions
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": toy_vector(t, size, server.model),
                    }
                    for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the index, not the order, says which input a vector is for
                return self._send(200, {"object": "list", "data": data, "model": body["model"]})

            def _send(self, status: int, payload: Any) -> None:
                self._send_bytes(status, json.dumps(payload).encode())

            def _send_bytes(self, status: int, out: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serving = ServerThread(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._serving is not None
        self._serving.stop()
