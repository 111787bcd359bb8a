"""A TCP listener on 127.0.0.1 for the tests' hand-written servers: each connection is handled
in a thread of its own until the listener closes."""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Self


class Listener:
    """Subclass and define ``handle``; use as a context manager. ``closing`` is set on exit."""

    def __init__(self) -> None:
        self.closing = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.closing.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()
