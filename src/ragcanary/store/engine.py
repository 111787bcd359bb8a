"""Engines on SQLite or PostgreSQL as the store needs them: deadlines, pragmas, transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy
from sqlalchemy import ColumnElement, Connection, Engine, event, exc
from sqlalchemy.dialects import postgresql, sqlite

from ragcanary.store.errors import StorageError
from ragcanary.store.schema import JSON_ENCODER

SQLITE_BUSY_TIMEOUT_MS = 10_000
# Every PostgreSQL call has a deadline, so a database that stops answering (down, or packets
# silently dropped) fails a call within seconds instead of holding a thread for minutes.
POSTGRES_CONNECT_TIMEOUT_S = 5
POSTGRES_STATEMENT_TIMEOUT_MS = 10_000
POSTGRES_LOCK_TIMEOUT_MS = 5_000
# A socket whose sent data stays unacknowledged this long is dead (libpq's tcp_user_timeout);
# keepalives find a silent peer while nothing is being sent.
POSTGRES_TCP_USER_TIMEOUT_MS = 10_000
POSTGRES_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
}
POOL_TIMEOUT_S = 5  # waiting for a pooled connection
WRITE = "ragcanary_write"  # execution option: this transaction will write


def make_engine(url: str, **options: Any) -> Engine:
    """An engine for ``url`` as ragcanary needs it; ``options`` go to ``sqlalchemy.create_engine``.

    SQLite gets WAL (readers never block the writer), foreign keys, a busy timeout and real
    transactions; every backend gets pre-ping, so connections dropped during an outage are
    replaced instead of failing once more after it ends.
    """
    try:
        parsed = sqlalchemy.make_url(url)
    except exc.ArgumentError:
        raise StorageError(
            "the storage URL is not valid; write sqlite:///path/to/ragcanary.db "
            "or postgresql+psycopg://user@host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StorageError(
            f"storage {parsed.render_as_string(hide_password=True)} is not supported; "
            "use sqlite:///path/to/ragcanary.db or postgresql+psycopg://user@host/db"
        )
    options.setdefault("pool_pre_ping", True)
    # One encoder for every value: json.dumps with options would build a new one each time.
    options["json_serializer"] = JSON_ENCODER.encode
    if "poolclass" not in options:  # NullPool has no wait for a pooled connection
        options.setdefault("pool_timeout", POOL_TIMEOUT_S)
    if backend == "postgresql":
        connect_args = dict(options.get("connect_args", {}))
        deadlines: dict[str, Any] = {
            "connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
            "tcp_user_timeout": POSTGRES_TCP_USER_TIMEOUT_MS,
            **POSTGRES_KEEPALIVES,
        }
        for key, value in deadlines.items():
            if key not in parsed.query:  # the storage URL's own settings win
                connect_args.setdefault(key, value)
        # psycopg prepares a statement on the server once a connection ran it five times,
        # and PostgreSQL then plans it for any parameters: for the look-up of a run's
        # rankings by digest within a time window that generic plan scans the time index
        # instead of probing the digests, 30 times slower (a save of 1,000 canaries went
        # from 0.1 to 0.47 s; docs/performance.md, "Storage"). Every statement is planned
        # for its own values instead, which costs a fraction of a millisecond.
        connect_args.setdefault("prepare_threshold", None)
        options["connect_args"] = connect_args
    try:
        engine = sqlalchemy.create_engine(parsed, **options)
    except (exc.SQLAlchemyError, ImportError) as error:
        where = parsed.render_as_string(hide_password=True)
        raise StorageError(f"cannot use storage {where}: {error}") from None
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        event.listen(engine, "connect", _postgres_connect)
    return engine


def insert_for(conn: Connection) -> Any:
    """The dialect's ``insert``, which has ``on_conflict_do_nothing`` and ``..._do_update``."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def among(conn: Connection, column: ColumnElement[Any], values: Sequence[Any]) -> Any:
    """``column IN values``. On PostgreSQL one array parameter (``= ANY``): the statement is
    short and the same for any number of values, where an IN list makes SQLAlchemy and
    psycopg render and parse one placeholder per value, a quarter of reading a whole report
    there (docs/performance.md, "Web pages"). SQLite has no arrays."""
    if conn.dialect.name == "postgresql":
        array = postgresql.ARRAY(column.type)
        return column == sqlalchemy.any_(sqlalchemy.bindparam(None, list(values), type_=array))
    return column.in_(values)


def _postgres_connect(dbapi_connection: Any, _record: Any) -> None:
    # Instants then arrive in UTC already (tzinfo datetime.UTC), which UTCDateTime passes on
    # as they are instead of converting each one: a tenth of reading a 30-day history.
    dbapi_connection.execute("SET TIME ZONE 'UTC'")
    # Not through the URL's `options`: the storage URL may carry its own (a search_path).
    dbapi_connection.execute(f"SET statement_timeout = {POSTGRES_STATEMENT_TIMEOUT_MS}")
    dbapi_connection.execute(f"SET lock_timeout = {POSTGRES_LOCK_TIMEOUT_MS}")
    dbapi_connection.commit()  # or the pool's rollback on return would undo the SETs


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # sqlite3 would only BEGIN before DML, leaving DDL and reads outside transactions;
    # _sqlite_begin emits BEGIN itself instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        # With WAL, NORMAL only risks the last commits on power loss, never corruption.
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # A writer takes the write lock up front: a deferred transaction that read first cannot
    # wait for the lock (SQLite returns BUSY at once), an immediate one waits busy_timeout.
    write = conn.get_execution_options().get(WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
