"""pgvector: the rows of a PostgreSQL table nearest the canary's vector, asked in SQL.

SQLAlchemy Core builds the statement from the config's identifiers (checked as plain names by
the config model, quoted here as PostgreSQL needs them); the vector and ``k`` are bound
parameters. ``where`` is the operator's own SQL (trusted config, like the dsn beside it; see
docs/targets.md) and runs, as all the rest, inside a READ ONLY transaction with a local
statement_timeout. Calls run in worker threads on a synchronous engine, as the store's do.

Failures are the outcomes HTTP targets have; psycopg and SQLAlchemy errors stop here:

    connect_error  no connection: refused, unknown host, the server starting or shutting
                   down, too many clients, the connection lost mid-query        (retried)
    timeout        no connection or no answer within ``timeout`` (statement_timeout),
                   or no pooled connection free                                 (retried)
    bad_response   refused for what was asked: login, database, table, column, dimension,
                   permission, an error in ``where``                            (not retried)
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy
from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Float,
    Select,
    Text,
    any_,
    bindparam,
    cast,
    column,
    func,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import ARRAY, psycopg
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.types import UserDefinedType

from ragcanary.config.model import TargetConfig
from ragcanary.config.sql import DSN_EXAMPLE
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.lookup import BATCH, integers, uuids
from ragcanary.probe.target import (
    MAX_ID_LENGTH,
    TRANSIENT,
    QueryFailed,
    backoff_delay,
    shorten_vectors,
)
from ragcanary.redact import Redactor

OPERATORS = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
VECTOR_TYPES = ("vector", "halfvec")  # pgvector's dense types: the query is cast to the column's
INTEGER_TYPES = ("int2", "int4", "int8")  # id columns whose ids are bound as integers
TEXT_TYPES = ("text", "varchar", "name", "citext")  # and those compared with text as they are
SHOWN_NAMES = 20  # tables or columns a "not found" lists at most
MIN_CONNECT_TIMEOUT_S = 2  # libpq reads 1 as 2 and 0 as no deadline at all
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
}
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
# How validate --live shows the SQL: ":vector" reads better than psycopg's "%(vector)s".
_SHOWN = psycopg.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
_SET_TIMEOUT = select(func.set_config("statement_timeout", bindparam("ms"), True))
_COLUMNS = text(
    "SELECT a.attname, t.typname, a.atttypmod"
    " FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid"
    " WHERE a.attrelid = to_regclass(:relation) AND a.attnum > 0 AND NOT a.attisdropped"
    " ORDER BY a.attnum"
)
_VECTOR_TABLES = text(
    "SELECT DISTINCT CASE WHEN pg_catalog.pg_table_is_visible(c.oid) THEN c.relname"
    " ELSE n.nspname || '.' || c.relname END AS name"
    " FROM pg_catalog.pg_class AS c"
    " JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
    " JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0"
    " JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid"
    " WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND NOT a.attisdropped"
    " AND t.typname IN ('vector', 'halfvec')"
    " AND n.nspname <> 'information_schema' AND left(n.nspname, 3) <> 'pg_'"
    " ORDER BY name"
)

_Ranked = tuple[tuple[str, ...], tuple[float | None, ...]]


class _VectorType(UserDefinedType[list[float]]):
    """pgvector's ``vector`` or ``halfvec``, the type the bound query vector is cast to."""

    cache_ok = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_col_spec(self, **_: Any) -> str:
        return self.name


@dataclass(frozen=True)
class _Layout:
    """What the catalog says of the vector column, and the statement built for its type."""

    kind: str  # vector or halfvec
    dimensions: int | None  # None when the column takes vectors of any size
    statement: Select[Any]
    id_kind: str = "text"  # the id column's type: how relevant ids are looked up


def make_engine(config: TargetConfig) -> Engine:
    """A pool of ``concurrency`` connections to ``config.dsn``, each with connect deadlines.

    Only psycopg (3) speaks to it, whatever driver the dsn names; the dsn's own
    ``connect_timeout`` and keepalive settings win over ours.
    """
    assert config.dsn is not None  # the config model requires it for pgvector
    url = sqlalchemy.make_url(config.dsn).set(drivername="postgresql+psycopg")
    deadlines: dict[str, Any] = {
        "connect_timeout": max(MIN_CONNECT_TIMEOUT_S, math.ceil(config.timeout)),
        "tcp_user_timeout": math.ceil(config.timeout * 1000),
        **KEEPALIVES,
    }
    return sqlalchemy.create_engine(
        url,
        pool_size=config.concurrency,
        max_overflow=0,
        pool_timeout=config.timeout,
        pool_pre_ping=True,
        connect_args={k: v for k, v in deadlines.items() if k not in url.query},
        # psycopg begins every transaction READ ONLY: set on the client, where no SQL of the
        # query (where:) can turn it off.
        execution_options={"postgresql_readonly": True},
    )


class PgvectorTarget:
    """A table's ``k`` rows nearest the canary's vector by one of pgvector's distances.

    The table and its columns are looked up in the catalog with the first query (again
    after a query the table refused): a missing table lists those with a vector column, a
    missing column lists the table's, and a vector of the wrong size names both sizes.
    """

    def __init__(
        self,
        name: str,
        config: TargetConfig,
        *,
        redact: Callable[[str], str] = lambda s: s,
        engine: Engine | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """``engine`` defaults to one on ``config.dsn`` that ``aclose`` disposes of."""
        # The config model requires these of a pgvector target (config/sql.py).
        assert config.dsn is not None
        assert config.table is not None
        assert config.id_column is not None
        assert config.vector_column is not None
        self._id_column, self._vector_column = config.id_column, config.vector_column
        self.name = name
        self._config = config
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        url = _parsed(config.dsn)
        own = Redactor(_passwords(url))
        self._redact: Callable[[str], str] = lambda text: redact(own(text))
        self._server = url.render_as_string(hide_password=True) if url else "the dsn"
        schema, _, table_name = config.table.rpartition(".")
        self._table = table(
            table_name,
            column(config.id_column),
            column(config.vector_column),
            schema=schema or None,
        )
        self._relation = _SHOWN.identifier_preparer.format_table(self._table)
        self._owns_engine = engine is None
        self._unusable: str | None = None
        if engine is None:
            try:
                engine = make_engine(config)
            except (sa_exc.SQLAlchemyError, ValueError, ImportError) as exc:
                reason = f"dsn: cannot be used ({_first_line(exc)}); write it like {DSN_EXAMPLE}"
                self._unusable = reason
        self._engine = engine
        self._layout: _Layout | None = None  # looked up by the first query
        self._sent: tuple[list[float], int] | None = None  # the last query's parameters
        # Queries in worker threads, kept until they end: one past its deadline still holds a
        # connection until statement_timeout stops it, and aclose waits for it.
        self._running: set[asyncio.Future[list[Any]]] = set()

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The ``k`` rows nearest ``vector``, nearest first; retries what may pass."""
        if vector is None:
            reason = "the pgvector preset queries by vector: set embedding:"
            return Answer((), (), 0.0, "bad_response", reason)
        attempts = self._config.retries + 1
        attempt = 0
        while True:
            started = self._clock()
            try:
                ids, scores = await self._attempt([float(x) for x in vector], k)
            except QueryFailed as failure:
                latency = self._clock() - started
                attempt += 1
                if failure.outcome not in TRANSIENT or attempt >= attempts:
                    reason = failure.reason
                    if attempt > 1:
                        reason = f"{reason} (after {attempt} attempts)"
                    return Answer((), (), latency, failure.outcome, self._redact(reason))
                await self._sleep(backoff_delay(attempt - 1, self._jitter()))
                continue
            return Answer(ids, scores, self._clock() - started, "ok" if ids else "empty")

    def describe_last_request(self) -> str:
        """The SQL of the last query with its parameters, a vector cut short, secrets masked."""
        if self._sent is None:
            return "(no request was sent)"
        vector, k = self._sent
        statement = self._layout.statement if self._layout else self._statement(VECTOR_TYPES[0])
        sql = re.sub(r"\s*\n\s*", " ", str(statement.compile(dialect=_SHOWN)))
        parameters = json.dumps(shorten_vectors({"vector": vector, "k": k}))
        return self._redact(f"SQL on {self._server}: {sql}; parameters {parameters}")

    async def aclose(self) -> None:
        """Close the connections of the engine this target made (not one passed in).

        Queries cut off by the deadline are waited for first; the server's statement_timeout,
        the same deadline, ends them soon after.
        """
        await asyncio.gather(*self._running, return_exceptions=True)
        if self._owns_engine and self._engine is not None:
            await asyncio.to_thread(self._engine.dispose)

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` that no row the search can return holds (a row without a
        vector, or outside ``where``, is none); None when that cannot be told. Never raises."""
        wanted = list(dict.fromkeys(ids))
        held: set[str] = set()
        try:
            for start in range(0, len(wanted), BATCH):
                batch = wanted[start : start + BATCH]
                for attempt in range(self._config.retries + 1):
                    try:
                        rows = await self._call(functools.partial(self._held, ids=batch))
                        break
                    except QueryFailed as failure:
                        if failure.outcome not in TRANSIENT or attempt == self._config.retries:
                            raise
                        await self._sleep(backoff_delay(attempt, self._jitter()))
                held |= {str(raw_id) for (raw_id,) in rows}
        except Exception:  # a lookup that failed, or a bug in one, says nothing of the labels
            return None
        return set(wanted) - held

    async def _attempt(self, vector: list[float], k: int) -> _Ranked:
        """One query; raises ``QueryFailed`` for every kind of failure."""
        self._sent = (vector, k)
        return self._ranked(await self._call(lambda conn: self._ask(conn, vector, k)))

    async def _call(self, ask: Callable[[Connection], list[Any]]) -> list[Any]:
        """``ask`` in a worker thread, on a connection in a READ ONLY transaction with the
        deadline; raises ``QueryFailed`` for every kind of failure."""
        if self._unusable is not None or self._engine is None:
            raise QueryFailed("bad_response", self._unusable or "no engine")
        timeout = self._config.timeout
        try:
            # The deadline covers waiting for a pooled connection, connecting and the query;
            # statement_timeout stops the query in the server too.
            work = asyncio.ensure_future(asyncio.to_thread(self._connected, self._engine, ask))
            self._running.add(work)
            work.add_done_callback(self._running.discard)
            async with asyncio.timeout(timeout):
                rows = await asyncio.shield(work)
        except QueryFailed:
            raise
        except TimeoutError as exc:
            raise QueryFailed("timeout", f"no answer within {timeout:g}s") from exc
        except sa_exc.TimeoutError as exc:
            reason = f"no free connection within {timeout:g}s (all {self._config.concurrency} busy)"
            raise QueryFailed("timeout", reason) from exc
        except sa_exc.DBAPIError as exc:
            raise self._failure(exc) from exc
        except Exception as exc:
            # A bug or an unforeseen library error must still end as an outcome, not a crash.
            reason = f"unexpected error: {type(exc).__name__}: {_first_line(exc)}"
            raise QueryFailed("bad_response", reason) from exc
        return rows

    def _connected(self, engine: Engine, ask: Callable[[Connection], list[Any]]) -> list[Any]:
        """``ask`` in one READ ONLY transaction, after setting its deadline."""
        with engine.connect() as conn:
            # A bound parameter: SET cannot take one, set_config can. Local to the transaction.
            conn.execute(_SET_TIMEOUT, {"ms": str(math.ceil(self._config.timeout * 1000))})
            return ask(conn)

    def _ask(self, conn: Connection, vector: list[float], k: int) -> list[Any]:
        """The catalog (once), then the rows nearest ``vector``."""
        layout = self._layout or self._look_up(conn)
        self._layout = layout
        if layout.dimensions is not None and layout.dimensions != len(vector):
            raise QueryFailed("bad_response", self._wrong_dimension(layout, len(vector)))
        return list(conn.execute(layout.statement, {"vector": vector, "k": k}))

    def _held(self, conn: Connection, ids: list[str]) -> list[Any]:
        """The catalog (once), then the ids of ``ids`` that rows the search sees hold:
        ``WHERE id = ANY(:ids)``, the ids bound as the id column's type."""
        layout = self._layout or self._look_up(conn)
        self._layout = layout
        id_column: Any = self._table.c[self._id_column]
        array, values = _id_array(layout.id_kind, ids)
        if not values:
            return []
        if layout.id_kind not in (*TEXT_TYPES, *INTEGER_TYPES, "uuid"):
            id_column = cast(id_column, Text)  # compared as the search prints it
        statement = select(id_column).where(id_column == any_(cast(bindparam("ids"), array)))
        statement = statement.where(self._table.c[self._vector_column].is_not(None))
        if self._config.where is not None:
            statement = statement.where(literal_column(f"({self._config.where})"))
        return list(conn.execute(statement, {"ids": values}))

    def _look_up(self, conn: Connection) -> _Layout:
        """The vector column's type and size; ``QueryFailed`` naming what exists instead."""
        config = self._config
        columns = {
            name: (kind, size)
            for name, kind, size in conn.execute(_COLUMNS, {"relation": self._relation})
        }
        if not columns:
            names = [str(name) for (name,) in conn.execute(_VECTOR_TABLES)]
            missing = f"table {config.table} not found in {self._server}"
            if not names:
                raise QueryFailed(
                    "bad_response",
                    f"{missing}, where no table has a vector column; check the database in dsn:",
                )
            raise QueryFailed("bad_response", f"{missing}; set table: to {_one_of(names)}")
        vectors = [name for name, (kind, _) in columns.items() if kind in VECTOR_TYPES]
        id_column, vector_column = self._id_column, self._vector_column
        if id_column not in columns:
            others = [name for name in columns if name not in vectors]
            raise QueryFailed(
                "bad_response",
                f"column {id_column} not found in table {config.table}; "
                f"set id_column: to {_one_of(others or list(columns))}",
            )
        found = columns.get(vector_column)
        if found is None or found[0] not in VECTOR_TYPES:
            what = "not found in" if found is None else f"is {found[0]}, not a vector, in"
            fix = (
                f"set vector_column: to {_one_of(vectors)}"
                if vectors
                else "it has no vector column"
            )
            raise QueryFailed(
                "bad_response", f"column {vector_column} {what} table {config.table}; {fix}"
            )
        kind, size = found
        # pgvector keeps a column's dimensions as its type modifier; -1 when it has none.
        dimensions = int(size) if size and int(size) > 0 else None
        return _Layout(kind, dimensions, self._statement(kind), columns[id_column][0])

    def _statement(self, kind: str) -> Select[Any]:
        """SELECT id, distance ... ORDER BY distance LIMIT :k, the vector cast to ``kind``."""
        config = self._config
        operator = OPERATORS[config.distance]
        query_vector = cast(bindparam("vector"), _VectorType(kind))
        distance = self._table.c[self._vector_column].op(operator, return_type=Float)(query_vector)
        statement = select(self._table.c[self._id_column].label("id"), distance.label("score"))
        if config.where is not None:
            # Trusted config, checked to be one balanced condition; read-only and timed out.
            statement = statement.where(literal_column(f"({config.where})"))
        return statement.order_by(distance).limit(bindparam("k"))

    def _wrong_dimension(self, layout: _Layout, size: int) -> str:
        config = self._config
        return (
            f"wrong dimension: column {config.table}.{config.vector_column} is "
            f"{layout.kind}({layout.dimensions}) but the embedding {config.embedding} gives "
            f"{size} numbers; embed with a model of {layout.dimensions} dimensions (or set "
            f"dimensions: {layout.dimensions} under embeddings.{config.embedding} if it can), "
            f"or point vector_column: at a column of {size}"
        )

    def _failure(self, error: sa_exc.DBAPIError) -> QueryFailed:
        """The outcome and reason of a driver error (module docstring has the table)."""
        message = _first_line(error.orig) or type(error.orig).__name__
        state = getattr(error.orig, "sqlstate", None)
        if not isinstance(state, str):  # no SQLSTATE: the connection itself failed
            return _connection_failure(message, self._config.timeout)
        if state == "57014":
            return QueryFailed("timeout", f"no answer within {self._config.timeout:g}s: {message}")
        if state.startswith(_TRANSIENT_STATES):
            return QueryFailed("connect_error", f"PostgreSQL: {message} (SQLSTATE {state})")
        self._layout = None  # the table may have changed: look it up again next time
        if state == "22000" and "dimensions" in message:
            return QueryFailed(
                "bad_response",
                f"wrong dimension: {message} (the embedding {self._config.embedding} gives "
                f"{len(self._sent[0]) if self._sent else '?'} numbers); embed with the model "
                f"the column {self._config.vector_column} was filled with",
            )
        hint = _HINTS.get(state, "check table:, the columns and where:")
        if state in ("42704", "42883") and "vector" in message:  # type or operator not found
            hint = _SEARCH_PATH
        return QueryFailed(
            "bad_response", f"PostgreSQL refused the query: {message} (SQLSTATE {state}); {hint}"
        )

    def _ranked(self, rows: list[Any]) -> _Ranked:
        ids: list[str] = []
        scores: list[float | None] = []
        id_column = self._id_column
        for rank, (raw_id, distance) in enumerate(rows, start=1):
            if distance is None:
                continue  # a row without a vector has no distance, and no index returns it
            if raw_id is None:
                raise QueryFailed(
                    "bad_response",
                    f"row {rank}: {id_column} is NULL; point id_column: at a column without NULLs",
                )
            doc_id = str(raw_id)
            if len(doc_id) > MAX_ID_LENGTH:
                raise QueryFailed(
                    "bad_response",
                    f"row {rank}: {id_column} has {len(doc_id)} characters; ids may have at "
                    f"most {MAX_ID_LENGTH}",
                )
            if not math.isfinite(float(distance)):
                raise QueryFailed(
                    "bad_response", f"row {rank}: the distance is {distance}, not a finite number"
                )
            # A secret the table holds must not be stored or exported with the id.
            ids.append(self._redact(doc_id))
            scores.append(float(distance))
        return tuple(ids), tuple(scores)


def _id_array(kind: str, ids: list[str]) -> tuple[ARRAY[Any], list[Any]]:
    """The array type ``:ids`` is cast to for an id column of type ``kind``, and the ids a
    column of that type can hold (``7`` for an integer column, a UUID for a uuid one)."""
    if kind in INTEGER_TYPES:
        return ARRAY(BigInteger), [i for i in integers(ids) if -(2**63) <= i < 2**63]
    if kind == "uuid":
        return ARRAY(PG_UUID(as_uuid=False)), uuids(ids)
    return ARRAY(Text), ids


def _connection_failure(message: str, timeout: float) -> QueryFailed:
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


def _parsed(dsn: str) -> sqlalchemy.URL | None:
    try:
        return sqlalchemy.make_url(dsn)
    except (sa_exc.ArgumentError, ValueError):
        return None


def _passwords(url: sqlalchemy.URL | None) -> list[str]:
    """The dsn's password, in its place or as a ``password=`` parameter."""
    if url is None:
        return []
    found = [url.password] if url.password else []
    given = url.query.get("password")
    found += [given] if isinstance(given, str) else list(given or ())
    return [str(p) for p in found]


def _one_of(names: Sequence[str]) -> str:
    """``one of a, b and 3 more``, sorted."""
    ordered = sorted(names)
    more = len(ordered) - SHOWN_NAMES
    return "one of " + ", ".join(ordered[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")


def _first_line(exc: BaseException | None) -> str:
    lines = str(exc).strip().splitlines() if exc is not None else []
    return lines[0][:300] if lines else ""
