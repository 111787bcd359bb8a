"""What psycopg's and SQLAlchemy's errors mean for a pgvector query: an outcome and a fix.

connect_error  no connection: refused, unknown host, the server starting or shutting
               down, too many clients, the connection lost mid-query        (retried)
timeout        no connection or no answer within ``timeout`` (statement_timeout),
               or no pooled connection free                                 (retried)
bad_response   refused for what was asked: login, database, table, column, dimension,
               permission, an error in ``where``                            (not retried)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy
from sqlalchemy import exc as sa_exc

from ragcanary.config.target import TargetConfig
from ragcanary.probe.retries import QueryFailed

SHOWN_NAMES = 20  # tables or columns a "not found" lists at most
# SQLSTATEs of a server that is going away or overloaded: try again later.
_TRANSIENT_STATES = ("08", "53", "57P", "40001", "40P01")
# Words of libpq's refusals at login (they come without a SQLSTATE): the dsn is wrong.
_LOGIN_REFUSED = ("password", "authentication", "pg_hba.conf", "does not exist", "certificate")
_SEARCH_PATH = (
    "the vector extension's schema must be on the role's search_path: add "
    "?options=-csearch_path%3Dpublic,extensions (your schema) to dsn:"
)
_HINTS = {
    "42501": "grant the dsn's user SELECT on the table",
    "25006": "where: may only read (the query runs in a READ ONLY transaction)",
    "42P01": "check table:",
    "42703": "check id_column:, vector_column: and where:",
    "42601": "check where:",
    "42883": "check where:",
    "42704": "check where:",
}


def driver_failure(error: sa_exc.DBAPIError, config: TargetConfig, sent: int | None) -> QueryFailed:
    """The outcome and reason of a driver error; ``sent`` is the size of the vector sent."""
    message = first_line(error.orig) or type(error.orig).__name__
    state = getattr(error.orig, "sqlstate", None)
    if not isinstance(state, str):  # no SQLSTATE: the connection itself failed
        return connection_failure(message, config.timeout)
    if state == "57014":
        return QueryFailed("timeout", f"no answer within {config.timeout:g}s: {message}")
    if state.startswith(_TRANSIENT_STATES):
        return QueryFailed("connect_error", f"PostgreSQL: {message} (SQLSTATE {state})")
    if state == "22000" and "dimensions" in message:
        return QueryFailed(
            "bad_response",
            f"wrong dimension: {message} (the embedding {config.embedding} gives "
            f"{sent if sent is not None else '?'} numbers); embed with the model "
            f"the column {config.vector_column} was filled with",
        )
    hint = _HINTS.get(state, "check table:, the columns and where:")
    if state in ("42704", "42883") and "vector" in message:  # type or operator not found
        hint = _SEARCH_PATH
    return QueryFailed(
        "bad_response", f"PostgreSQL refused the query: {message} (SQLSTATE {state}); {hint}"
    )


def connection_failure(message: str, timeout: float) -> QueryFailed:
    """A failed connection: a refused login is the dsn's fault, the rest may pass."""
    lowered = message.lower()
    if "timeout expired" in lowered:
        return QueryFailed("timeout", f"no connection within {timeout:g}s: {message}")
    if any(word in lowered for word in _LOGIN_REFUSED):
        return QueryFailed(
            "bad_response",
            f"PostgreSQL refused the login: {message}; check the user, password and database "
            "in dsn: (a ${VAR} in it must be set)",
        )
    return QueryFailed("connect_error", f"cannot reach PostgreSQL: {message}")


def parsed(dsn: str) -> sqlalchemy.URL | None:
    try:
        return sqlalchemy.make_url(dsn)
    except (sa_exc.ArgumentError, ValueError):
        return None


def passwords(url: sqlalchemy.URL | None) -> list[str]:
    """The dsn's password, in its place or as a ``password=`` parameter."""
    if url is None:
        return []
    found = [url.password] if url.password else []
    given = url.query.get("password")
    found += [given] if isinstance(given, str) else list(given or ())
    return [str(p) for p in found]


def one_of(names: Sequence[str]) -> str:
    """``one of a, b and 3 more``, sorted."""
    ordered = sorted(names)
    more = len(ordered) - SHOWN_NAMES
    return "one of " + ", ".join(ordered[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")


def first_line(exc: BaseException | None) -> str:
    lines = str(exc).strip().splitlines() if exc is not None else []
    return lines[0][:300] if lines else ""
