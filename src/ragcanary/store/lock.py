"""One `ragcanary serve` per SQLite file: a second daemon on the same file is refused.

Two daemons on one SQLite file would both run every canary and store everything twice, and
SQLite is for one process. An exclusive ``flock`` on ``<database>.lock`` beside the file
holds the owner's pid; the kernel drops it when the process dies, however it dies. On
PostgreSQL any number of daemons may run: they are replicas that share the work
(``ragcanary.serve.replicas``), so nothing is locked here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO, Protocol

import sqlalchemy

from ragcanary.errors import UsageError


class DatabaseInUse(UsageError):
    """Another live `ragcanary serve` already uses this storage (exit 2)."""


class Lock(Protocol):
    def release(self) -> None: ...


def acquire(storage_url: str) -> Lock:
    """Hold a SQLite storage for this process; raise ``DatabaseInUse`` naming the other daemon.

    Raises ``UsageError`` when the lock cannot even be tried (no such directory).
    """
    url = sqlalchemy.make_url(storage_url)
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return _NoLock()
        path = Path(url.database)
        return _FileLock.acquire(path.with_name(path.name + ".lock"), shown)
    return _NoLock()  # PostgreSQL: replicas share the work through serve/replicas/


class _NoLock:
    def release(self) -> None:
        pass


class _FileLock:
    def __init__(self, handle: IO[str], path: Path) -> None:
        self._handle = handle
        self.path = path

    @classmethod
    def acquire(cls, path: Path, shown: str) -> _FileLock:
        try:
            handle = path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"cannot create the lock file {path} for storage {shown} ({exc.strerror}); "
                "check that its directory exists and is writable"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise DatabaseInUse(
                f"storage {shown} is in use by another ragcanary serve (pid {holder}); "
                "SQLite is for one process: stop it, point storage at another file, or run "
                "replicas on PostgreSQL"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return cls(handle, path)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self._handle.truncate(0)
        self._handle.close()  # closing the descriptor drops the flock
