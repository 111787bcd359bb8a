"""A forward HTTP proxy on 127.0.0.1, the kind ``HTTP_PROXY`` and ``HTTPS_PROXY`` point at.

A request in absolute form (``POST http://host:port/path HTTP/1.1``) is sent on to its origin
over a new connection and the answer relayed back; ``CONNECT host:port`` opens a tunnel that
carries TLS through untouched. Every request line is recorded in ``seen``. Only origins on
127.0.0.1 are reached: it is a test's proxy, and refuses anything else with a 403.
"""

from __future__ import annotations

import select
import socket
import threading
from urllib.parse import urlsplit

from listener import Listener

_HEAD_LIMIT = 65536


class ForwardProxy(Listener):
    """Use as a context manager; ``url`` is the proxy's own (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handle(self, conn: socket.socket) -> None:
        self._serve(conn)

    def _serve(self, client: socket.socket) -> None:
        with client:
            head, rest = _read_head(client)
            if head is None:
                return
            request_line, _, headers = head.partition(b"\r\n")
            method, target, version = request_line.decode("latin-1").split(" ", 2)
            with self._lock:
                self.seen.append(f"{method} {target}")
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                address = (host, int(port))
            else:
                parts = urlsplit(target)
                address = (parts.hostname or "", parts.port or 80)
            if address[0] != "127.0.0.1":
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            with socket.create_connection(address, timeout=5) as upstream:
                if method == "CONNECT":
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    upstream.sendall(rest)
                else:
                    # Origin form, and one request per connection so relaying ends at its close.
                    path = parts.path + (f"?{parts.query}" if parts.query else "")
                    kept = [
                        line
                        for line in headers.split(b"\r\n")
                        if line and not line.lower().startswith((b"connection:", b"proxy-"))
                    ]
                    first = f"{method} {path or '/'} {version}".encode("latin-1")
                    lines = [first, *kept, b"Connection: close", b"", b""]
                    upstream.sendall(b"\r\n".join(lines) + rest)
                self._relay(client, upstream)

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes or the proxy stops."""
        peers = {client: upstream, upstream: client}
        while not self.closing.is_set():
            readable, _, _ = select.select(list(peers), [], [], 0.05)
            for sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                peers[sock].sendall(data)


def _read_head(sock: socket.socket) -> tuple[bytes | None, bytes]:
    """The request head (without its blank line) and whatever arrived after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest
