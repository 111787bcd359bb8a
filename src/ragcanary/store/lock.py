"""One `ragcanary serve` per database: a second daemon on the same storage is refused.

Two daemons on one database would both run every canary and store everything twice. SQLite:
an exclusive ``flock`` on ``<database>.lock`` beside the file, holding the owner's pid. The
kernel drops it when the process dies, however it dies. PostgreSQL: a session advisory lock
keyed by the database and schema, held on a connection of its own whose
``application_name`` names the owner's pid; the server drops it when that session ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO, Any, Protocol

import sqlalchemy
from sqlalchemy.pool import NullPool

from ragcanary.errors import UsageError

APPLICATION = "ragcanary serve pid="
# Positive and below 2**62, so pg_locks' (classid, objid) halves read it back without overflow.
_KEY = (
    "SELECT hashtextextended(current_database() || '/' || current_schema(), 0) "
    "& 4611686018427387903"
)


_SERVER_KEEPALIVES = (
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
    "SET tcp_user_timeout = 10000",
)


class DatabaseInUse(UsageError):
    """Another live `ragcanary serve` already uses this storage (exit 2)."""


class Lock(Protocol):
    def release(self) -> None: ...


def acquire(storage_url: str) -> Lock:
    """Hold the storage for this process; raise ``DatabaseInUse`` naming the other daemon.

    Raises ``UsageError`` when the lock cannot even be tried (no such directory). A PostgreSQL
    that cannot be reached is no reason to refuse starting: the daemon buffers runs until it
    returns, and the lock is then not taken (say so in the log).
    """
    url = sqlalchemy.make_url(storage_url)
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return _NoLock()
        path = Path(url.database)
        return _FileLock.acquire(path.with_name(path.name + ".lock"), shown)
    return _AdvisoryLock.acquire(storage_url, shown)


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
                "stop it, or point storage at another file"
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


class _AdvisoryLock:
    def __init__(self, engine: sqlalchemy.Engine | None, conn: Any) -> None:
        self._engine = engine
        self._conn = conn

    @classmethod
    def acquire(cls, storage_url: str, shown: str) -> _AdvisoryLock:
        from ragcanary.store.storage import POSTGRES_CONNECT_TIMEOUT_S

        engine = sqlalchemy.create_engine(
            storage_url,
            poolclass=NullPool,
            connect_args={
                "connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
                "application_name": f"{APPLICATION}{os.getpid()}",
            },
        )
        try:
            conn = engine.connect()
        except sqlalchemy.exc.SQLAlchemyError:
            engine.dispose()
            return cls(None, None)
        try:
            # The server ends this session (and frees the lock) within seconds of losing this
            # process, even when a partition swallowed the close: a restart after one is
            # refused only that long, not for the kernel's default of two hours.
            for setting in _SERVER_KEEPALIVES:
                conn.execute(sqlalchemy.text(setting))
            key = conn.execute(sqlalchemy.text(_KEY)).scalar_one()
            taken = conn.execute(
                sqlalchemy.text("SELECT pg_try_advisory_lock(:key)"), {"key": key}
            ).scalar_one()
            conn.commit()  # the lock belongs to the session, not to this transaction
            if not taken:
                holder = conn.execute(
                    sqlalchemy.text(
                        "SELECT a.application_name FROM pg_locks l "
                        "JOIN pg_stat_activity a ON a.pid = l.pid "
                        "WHERE l.locktype = 'advisory' AND l.granted "
                        "AND ((l.classid::bigint << 32) | l.objid::bigint) = :key"
                    ),
                    {"key": key},
                ).scalar()
                pid = str(holder).removeprefix(APPLICATION) if holder else "unknown"
                conn.close()
                engine.dispose()
                raise DatabaseInUse(
                    f"storage {shown} is in use by another ragcanary serve (pid {pid}); stop "
                    "it, or point storage at another database or schema (a daemon cut off "
                    "from the database loses its hold within 20 s)"
                )
        except sqlalchemy.exc.SQLAlchemyError:
            conn.close()
            engine.dispose()
            return cls(None, None)
        return cls(engine, conn)

    def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):
                self._conn.close()  # ending the session drops the advisory lock
        if self._engine is not None:
            self._engine.dispose()
