"""A tiny HTTP retriever on 127.0.0.1 that answers every query after a fixed delay.

It runs in its own process: in the benchmark's process its threads would compete with
the runner's event loop for the GIL, and the runner would look slower than it is.

    .venv/bin/python bench/retriever.py DELAY_S     # prints its URL, serves until killed
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ragcanary.config import TargetConfig


class _Server(ThreadingHTTPServer):
    # The default listen backlog of 5 drops SYNs when 32 clients connect at once, and the
    # kernel's 1 s SYN retry would then be measured as if it were the runner's overhead.
    request_queue_size = 256
    daemon_threads = True


def _handler_for(delay_s: float) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        """``POST /search`` with ``{"q", "k"}`` answers ``{"hits": [...]}``; ``GET /count``."""

        protocol_version = "HTTP/1.1"  # keep-alive, as the runner's client pool expects
        # Headers and body leave in two writes; with Nagle on, the body waits for the client's
        # delayed ACK (40 ms on Linux) and every answer would look 40 ms slower than delay_s.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with lock:
                served[0] += 1
            time.sleep(delay_s)  # the retriever's search time, in this request's own thread
            k = int(body.get("k", 10))
            self._send({"hits": [{"id": f"doc-{i}", "score": 1.0 - i / 100} for i in range(k)]})

        def do_GET(self) -> None:
            self._send({"served": served[0]})

        def _send(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the results

    return Handler


class DelayedRetriever:
    """Starts ``retriever.py`` in a subprocess; ``url`` and ``served()`` once entered."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
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

    def served(self) -> int:
        """Search requests answered so far."""
        count = httpx.get(self.url.replace("/search", "/count")).json()["served"]
        return int(count)

    def __enter__(self) -> DelayedRetriever:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), str(self.delay_s)],
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
    server = _Server(("127.0.0.1", 0), _handler_for(float(sys.argv[1])))
    host, port = server.server_address[:2]
    print(f"http://{host!s}:{port}/search", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
