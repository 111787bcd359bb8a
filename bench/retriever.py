"""Retrievers on 127.0.0.1 that answer every search after exactly L seconds, each its own process.

The benchmarks time our client against the ideal ceil(N / C) * L, so a retriever must not be
the bottleneck on 2 shared cores, and it runs in its own process so that it does not compete
with the client for the GIL. Three kinds serve the same answer:

- ``raw``: a hand-written asyncio protocol that sends one pre-built response, the least any
  server can cost;
- ``uvicorn``: a Starlette app served by uvicorn, how many RAG teams serve search (FastAPI
  is Starlette underneath);
- ``aiohttp``: an aiohttp web application.

Each measures how late its own timers fire, since on a loaded machine a late retriever would
otherwise count as the client's overhead.

    .venv/bin/python bench/retriever.py LATENCY_S [KIND]    # prints its URL, serves until killed

``POST /search`` (any body) answers ``{"hits": [{"id": "doc-0", "score": 1.0}, ...]}`` with
``DEPTH`` hits after ``LATENCY_S``; ``GET /stats`` answers at once with the searches served,
their mean measured latency and the process's CPU seconds so far.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ragcanary.config.target import TargetConfig

DEPTH = 10


def _json(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def _response(body: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


SEARCH_BODY = _json({"hits": [{"id": f"doc-{i}", "score": 1 - i / 100} for i in range(DEPTH)]})
SEARCH_ANSWER = _response(SEARCH_BODY)


class _Stats:
    served = 0
    latency_s = 0.0  # summed from each request's arrival to its answer's write


class _Protocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection, as httpx sends them."""

    def __init__(self, latency_s: float, stats: _Stats) -> None:
        self._latency_s = latency_s
        self._stats = stats
        self._buffer = b""
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self._buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                line_end = head.find(b"\r\n", at)
                length = int(head[at + 15 : line_end if line_end >= 0 else end])
            if len(self._buffer) < end + 4 + length:
                return
            self._buffer = self._buffer[end + 4 + length :]
            if head.startswith(b"get /stats"):
                self._send(self._stats_answer())
            else:
                arrived = self._loop.time()
                self._loop.call_at(arrived + self._latency_s, self._answer, arrived)

    def _answer(self, arrived: float) -> None:
        self._stats.served += 1
        self._stats.latency_s += self._loop.time() - arrived
        self._send(SEARCH_ANSWER)

    def _send(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _stats_answer(self) -> bytes:
        return _response(_json(_stats_payload(self._stats)))


async def _serve_raw(latency_s: float) -> None:
    stats = _Stats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Protocol(latency_s, stats), "127.0.0.1", 0, backlog=1024
    )
    host, port = server.sockets[0].getsockname()[:2]
    print(f"http://{host}:{port}/search", flush=True)
    await server.serve_forever()


def _listening_socket() -> socket.socket:
    """A listening socket on a free port, its URL printed for the parent process.

    Made with proto IPPROTO_TCP, as ``uvicorn --host --port`` gets it from getaddrinfo:
    asyncio turns Nagle's algorithm off only on such sockets, and without that every answer
    that a server writes in two parts waits for the client's delayed ACK (40 ms).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/search", flush=True)
    return sock


def _stats_payload(stats: _Stats) -> dict[str, float]:
    served = stats.served
    return {
        "served": served,
        "mean_latency_s": stats.latency_s / served if served else 0.0,
        "cpu_s": time.process_time(),
    }


def _serve_uvicorn(latency_s: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    stats = _Stats()

    async def search(request: Request) -> Response:
        await request.body()
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        await asyncio.sleep(latency_s)
        stats.served += 1
        stats.latency_s += loop.time() - arrived
        return Response(SEARCH_BODY, media_type="application/json")

    async def stats_route(request: Request) -> Response:
        return JSONResponse(_stats_payload(stats))

    app = Starlette(
        routes=[Route("/search", search, methods=["POST"]), Route("/stats", stats_route)]
    )
    # Each loop's connections wait while the others take their turn, over 5 s a round on a
    # slow machine: uvicorn's default keep-alive (5 s) then closed them as a loop reused one,
    # and that loop's cycle failed ("Cannot write to closing transport"). aiohttp's is 75 s.
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75
    )
    uvicorn.Server(config).run(sockets=[_listening_socket()])


def _serve_aiohttp(latency_s: float) -> None:
    from aiohttp import web

    stats = _Stats()

    async def search(request: web.Request) -> web.Response:
        await request.read()
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        await asyncio.sleep(latency_s)
        stats.served += 1
        stats.latency_s += loop.time() - arrived
        return web.Response(body=SEARCH_BODY, content_type="application/json")

    async def stats_route(request: web.Request) -> web.Response:
        return web.json_response(_stats_payload(stats))

    app = web.Application()
    app.router.add_post("/search", search)
    app.router.add_get("/stats", stats_route)
    web.run_app(app, sock=_listening_socket(), print=None, access_log=None)


KINDS = ("raw", "uvicorn", "aiohttp")


class RetrieverProcess:
    """Starts ``retriever.py`` in a subprocess; ``url`` and ``stats()`` once entered."""

    def __init__(self, latency_s: float, kind: str = "raw") -> None:
        if kind not in KINDS:
            raise ValueError(f"no retriever of kind {kind!r}; choose from {', '.join(KINDS)}")
        self.latency_s = latency_s
        self.kind = kind
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def target_config(self, **overrides: Any) -> TargetConfig:
        """The README's example target shape pointed at this server; keywords override."""
        fields: dict[str, Any] = {
            "url": self.url,
            "body": {"q": "{query}", "k": "{k}"},
            "timeout": 10.0,
            "retries": 0,
        }
        return TargetConfig(**(fields | overrides))

    def stats(self) -> dict[str, float]:
        """Searches served, their mean measured latency, and the retriever's CPU seconds."""
        answer: dict[str, float] = httpx.get(self.url.replace("/search", "/stats")).json()
        return answer

    def __enter__(self) -> RetrieverProcess:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), str(self.latency_s), self.kind],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the retriever process exited before printing its URL")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._process is not None
        self._process.terminate()
        self._process.wait(timeout=10)


def main() -> None:
    latency_s = float(sys.argv[1])
    kind = sys.argv[2] if len(sys.argv) > 2 else "raw"
    if kind == "uvicorn":
        _serve_uvicorn(latency_s)
    elif kind == "aiohttp":
        _serve_aiohttp(latency_s)
    else:
        asyncio.run(_serve_raw(latency_s))


if __name__ == "__main__":
    main()
