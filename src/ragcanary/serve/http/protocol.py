"""uvicorn's HTTP/1.1 protocol with a header deadline and a cap on open connections.

uvicorn times out idle keep-alive connections, but not a client that connects and never
finishes a request head; 1,100 of those exhausted the process's file descriptors, and then
/metrics, /healthz and /readyz went unanswered with them. Here:

- a connection whose request head is not complete within ``header_timeout_s`` is closed;
- at most ``max_connections`` are open: a new one closes the oldest connection still waiting
  for its request head (a scraper sends its request at once, so it is never the oldest), or
  itself when every open connection is busy with a request.

Dropped clients are logged at debug, without a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import resource
import socket
from collections import OrderedDict
from typing import Any

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

from ragcanary.errors import UsageError

log = structlog.get_logger("ragcanary")

HEADER_TIMEOUT_S = 10.0
# File descriptors kept free for storage, target connections, logs and the spool.
RESERVED_FILES = 128
MAX_CONNECTIONS = 1000
# The listen backlog, which is also how many sockets asyncio accepts in one go, before any of
# them reaches connection_made (and the cap). A socket accepted on one pass of the event loop
# gets its transport on the next, reaches connection_made on the one after, and a connection
# dropped there is closed on the pass after that. So while the accept queue stays full, three
# batches beyond the cap hold files at once: the one just accepted, the one awaiting
# connection_made, and the one whose connection_made dropped as many older connections that
# are not yet closed. With room for two, a storm of slow clients from 16 threads ran the daemon
# out of files (asyncio logs every refused accept with a traceback, and the targets cannot be
# reached either).
IN_FLIGHT_BATCHES = 3
BACKLOG = 128


def check_address(listen: str) -> None:
    """Raise ``UsageError`` unless ``listen`` (HOST:PORT) can be bound now, as uvicorn will.

    Checked before anything starts, so a busy port is one clear line and exit 2 rather than
    a banner followed by uvicorn's error.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else f"not available ({exc.strerror})"
            raise UsageError(f"address {listen} is {why} (set listen: or --listen)") from None


def connection_cap(limit: int = MAX_CONNECTIONS) -> int:
    """``limit``, lowered so that open connections never exhaust the process's files."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(16, min(limit, soft - RESERVED_FILES - IN_FLIGHT_BATCHES * BACKLOG))


def guarded_protocol(
    header_timeout_s: float = HEADER_TIMEOUT_S, max_connections: int | None = None
) -> type[H11Protocol]:
    """A protocol class for one server (its own bookkeeping of waiting connections)."""
    cap = connection_cap() if max_connections is None else max_connections
    waiting: OrderedDict[GuardedProtocol, None] = OrderedDict()  # oldest first

    class GuardedProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap:
                oldest = next(iter(waiting), None)
                if oldest is None:
                    log.debug("connection refused: every connection is busy", cap=cap)
                    transport.close()
                    return
                oldest._drop("the connection cap was reached")
            self._wait_for_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._wait_for_head()  # (the rest of) a request head is still to come
            else:
                self._done_waiting()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Idle between requests: uvicorn's keep-alive timeout takes over.
            self._done_waiting()

        def connection_lost(self, exc: Exception | None) -> None:
            self._done_waiting()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(
                    header_timeout_s, self._drop, "no complete request head in time"
                )
            waiting[self] = None

        def _done_waiting(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            waiting.pop(self, None)

        def _drop(self, why: str) -> None:
            self._done_waiting()
            log.debug("dropped a slow HTTP client", reason=why, client=_client(self))
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol


def _client(protocol: Any) -> str | None:
    address = getattr(protocol, "client", None)
    return f"{address[0]}:{address[1]}" if address else None
