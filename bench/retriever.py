"""A retriever on 127.0.0.1 that answers every search after exactly L seconds, as cheaply as it can.

The benchmarks time our client against the ideal ceil(N / C) * L, so the retriever must not be
the bottleneck on 2 shared cores: it is a raw asyncio protocol (no HTTP framework) that sends
one response built at start, and it runs in its own process so it does not compete with the
client for the GIL. It measures how late its own timers fire, since on a loaded machine a
late retriever would otherwise count as the client's overhead.

    .venv/bin/python bench/retriever.py LATENCY_S    # prints its URL, serves until killed

``POST /search`` (any body) answers ``{"hits": [{"id": "doc-0", "score": 1.0}, ...]}`` with
``DEPTH`` hits after ``LATENCY_S``; ``GET /stats`` answers at once with the searches served,
their mean measured latency and the process's CPU seconds so far.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ragcanary.config.model import TargetConfig

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
        served = self._stats.served
        return _response(
            _json(
                {
                    "served": served,
                    "mean_latency_s": self._stats.latency_s / served if served else 0.0,
                    "cpu_s": time.process_time(),
                }
            )
        )


async def _serve(latency_s: float) -> None:
    stats = _Stats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Protocol(latency_s, stats), "127.0.0.1", 0, backlog=1024
    )
    host, port = server.sockets[0].getsockname()[:2]
    print(f"http://{host}:{port}/search", flush=True)
    await server.serve_forever()


class RetrieverProcess:
    """Starts ``retriever.py`` in a subprocess; ``url`` and ``stats()`` once entered."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def target_config(self, **overrides: Any) -> TargetConfig:
        """The contract's example target shape pointed at this server; keywords override."""
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
            [sys.executable, str(Path(__file__)), str(self.latency_s)],
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
    asyncio.run(_serve(float(sys.argv[1])))


if __name__ == "__main__":
    main()
