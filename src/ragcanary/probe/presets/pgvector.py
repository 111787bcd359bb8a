"""pgvector: the rows of a PostgreSQL table nearest the canary's vector, asked in SQL.

The statements (``pgvector_sql``) bind the vector and ``k``; everything, ``where`` included,
runs inside a READ ONLY transaction with a local statement_timeout. Calls run in worker
threads on a synchronous engine, as the store's do. psycopg and SQLAlchemy errors stop here,
as the outcomes HTTP targets have (``pgvector_errors`` has the table).
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
from typing import Any

from sqlalchemy import Connection, Engine, Select, column, table
from sqlalchemy import exc as sa_exc

from ragcanary.config.sql import DSN_EXAMPLE
from ragcanary.config.target import TargetConfig
from ragcanary.measure.fingerprint import IndexState
from ragcanary.measure.results import Answer
from ragcanary.probe.presets import pgvector_sql as sql
from ragcanary.probe.presets.lookup import BATCH
from ragcanary.probe.presets.pgvector_errors import (
    driver_failure,
    first_line,
    one_of,
    parsed,
    passwords,
)
from ragcanary.probe.retries import QueryFailed, Retrying, RetrySettings
from ragcanary.probe.target import MAX_ID_LENGTH
from ragcanary.probe.templates import shorten_vectors
from ragcanary.redact import Redactor
from ragcanary.threads import run_in

_Ranked = tuple[tuple[str, ...], tuple[float | None, ...]]


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
        redact: Redactor | None = None,
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
        # As an HTTP target's: `retries` more after a timeout or a connection error.
        self._retrying = Retrying(
            RetrySettings(config.retries), sleep=sleep, jitter=jitter, clock=clock
        )
        url = parsed(config.dsn)
        self._redact = (redact or Redactor(())).including(passwords(url))
        self._server = url.render_as_string(hide_password=True) if url else "the dsn"
        schema, _, table_name = config.table.rpartition(".")
        self._table = table(
            table_name,
            column(config.id_column),
            column(config.vector_column),
            schema=schema or None,
        )
        self._relation = sql.SHOWN.identifier_preparer.format_table(self._table)
        self._owns_engine = engine is None
        self._unusable: str | None = None
        if engine is None:
            try:
                engine = sql.make_engine(config)
            except (sa_exc.SQLAlchemyError, ValueError, ImportError) as exc:
                reason = f"dsn: cannot be used ({first_line(exc)}); write it like {DSN_EXAMPLE}"
                self._unusable = reason
        self._engine = engine
        self._layout: sql.Layout | None = None  # looked up by the first query
        self._sent: tuple[list[float], int] | None = None  # the last query's parameters
        # Queries in worker threads, kept until they end: one past its deadline still holds a
        # connection until statement_timeout stops it, and aclose waits for it.
        self._running: set[asyncio.Future[list[Any]]] = set()

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The ``k`` rows nearest ``vector``, nearest first; retries what may pass."""
        if vector is None:
            reason = "the pgvector preset queries by vector: set embedding:"
            return Answer((), (), 0.0, "bad_response", reason)
        numbers = [float(x) for x in vector]
        try:
            (ids, scores), latency = await self._retrying.timed(
                lambda: self._search_once(numbers, k)
            )
        except QueryFailed as failure:
            reason = self._redact(failure.counted)
            return Answer((), (), failure.latency_s, failure.outcome, reason)
        return Answer(ids, scores, latency, "ok" if ids else "empty")

    def describe_last_request(self) -> str:
        """The SQL of the last query with its parameters, a vector cut short, secrets masked."""
        if self._sent is None:
            return "(no request was sent)"
        vector, k = self._sent
        statement = self._layout.statement if self._layout else self._statement(sql.VECTOR_TYPES[0])
        shown = re.sub(r"\s*\n\s*", " ", str(statement.compile(dialect=sql.SHOWN)))
        parameters = json.dumps(shorten_vectors({"vector": vector, "k": k}))
        return self._redact(f"SQL on {self._server}: {shown}; parameters {parameters}")

    async def aclose(self) -> None:
        """Close the connections of the engine this target made (not one passed in).

        Queries cut off by the deadline are waited for first; the server's statement_timeout,
        the same deadline, ends them soon after.
        """
        await asyncio.gather(*self._running, return_exceptions=True)
        if self._owns_engine and self._engine is not None:
            await run_in(None, self._engine.dispose)

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` that no row the search can return holds (a row without a
        vector, or outside ``where``, is none); None when that cannot be told. Never raises."""
        wanted = list(dict.fromkeys(ids))
        held: set[str] = set()
        try:
            for start in range(0, len(wanted), BATCH):
                ask = functools.partial(self._held, ids=wanted[start : start + BATCH])
                rows = await self._retrying.call(functools.partial(self._call, ask))
                held |= {str(raw_id) for (raw_id,) in rows}
        except Exception:  # a lookup that failed, or a bug in one, says nothing of the labels
            return None
        return set(wanted) - held

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        """Each of ``ids`` that rows the search sees hold, with its smallest distance to
        ``vector`` by the search's own operator, computed row by row (exact, whatever index
        the table has); None when that cannot be told. Never raises."""
        wanted = list(dict.fromkeys(ids))
        numbers = [float(x) for x in vector]
        found: dict[str, float] = {}
        try:
            for start in range(0, len(wanted), BATCH):
                batch = wanted[start : start + BATCH]
                ask = functools.partial(self._distances, ids=batch, vector=numbers)
                rows = await self._retrying.call(functools.partial(self._call, ask))
                found |= {str(raw_id): float(d) for raw_id, d in rows if d is not None}
        except Exception:  # a lookup that failed, or a bug in one, says nothing of the ranking
            return None
        return found

    async def index_state(self) -> IndexState:
        """Nothing: ``count(*)`` reads the whole table (minutes on a large one) and
        ``pg_class.reltuples`` is an estimate that moves whenever autovacuum runs, so a
        fingerprint holding either would report changes nobody made (docs/report.md)."""
        return IndexState()

    async def texts(self, ids: Sequence[str]) -> dict[str, str] | None:
        """None: a table's text column is not configured, so a judge cannot read documents."""
        return None

    async def _search_once(self, vector: list[float], k: int) -> _Ranked:
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
            work = asyncio.ensure_future(run_in(None, self._connected, self._engine, ask))
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
            reason = f"unexpected error: {type(exc).__name__}: {first_line(exc)}"
            raise QueryFailed("bad_response", reason) from exc
        return rows

    def _connected(self, engine: Engine, ask: Callable[[Connection], list[Any]]) -> list[Any]:
        """``ask`` in one READ ONLY transaction, after setting its deadline."""
        with engine.connect() as conn:
            # A bound parameter: SET cannot take one, set_config can. Local to the transaction.
            conn.execute(sql.SET_TIMEOUT, {"ms": str(math.ceil(self._config.timeout * 1000))})
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
        found = sql.held(self._table, self._config, layout.id_kind, ids)
        if found is None:
            return []
        statement, values = found
        return list(conn.execute(statement, {"ids": values}))

    def _distances(self, conn: Connection, ids: list[str], vector: list[float]) -> list[Any]:
        """The catalog (once), then each held id of ``ids`` with its smallest distance."""
        layout = self._layout or self._look_up(conn)
        self._layout = layout
        found = sql.distances(self._table, self._config, layout.kind, layout.id_kind, ids)
        if found is None:
            return []
        statement, values = found
        return list(conn.execute(statement, {"ids": values, "vector": vector}))

    def _look_up(self, conn: Connection) -> sql.Layout:
        """The vector column's type and size; ``QueryFailed`` naming what exists instead."""
        config = self._config
        columns = {
            name: (kind, size)
            for name, kind, size in conn.execute(sql.COLUMNS, {"relation": self._relation})
        }
        if not columns:
            names = [str(name) for (name,) in conn.execute(sql.VECTOR_TABLES)]
            missing = f"table {config.table} not found in {self._server}"
            if not names:
                raise QueryFailed(
                    "bad_response",
                    f"{missing}, where no table has a vector column; check the database in dsn:",
                )
            raise QueryFailed("bad_response", f"{missing}; set table: to {one_of(names)}")
        vectors = [name for name, (kind, _) in columns.items() if kind in sql.VECTOR_TYPES]
        id_column, vector_column = self._id_column, self._vector_column
        if id_column not in columns:
            others = [name for name in columns if name not in vectors]
            raise QueryFailed(
                "bad_response",
                f"column {id_column} not found in table {config.table}; "
                f"set id_column: to {one_of(others or list(columns))}",
            )
        found = columns.get(vector_column)
        if found is None or found[0] not in sql.VECTOR_TYPES:
            what = "not found in" if found is None else f"is {found[0]}, not a vector, in"
            fix = (
                f"set vector_column: to {one_of(vectors)}" if vectors else "it has no vector column"
            )
            raise QueryFailed(
                "bad_response", f"column {vector_column} {what} table {config.table}; {fix}"
            )
        kind, size = found
        # pgvector keeps a column's dimensions as its type modifier; -1 when it has none.
        dimensions = int(size) if size and int(size) > 0 else None
        return sql.Layout(kind, dimensions, self._statement(kind), columns[id_column][0])

    def _statement(self, kind: str) -> Select[Any]:
        """SELECT id, distance ... ORDER BY distance LIMIT :k, the vector cast to ``kind``."""
        return sql.nearest(self._table, self._config, kind)

    def _wrong_dimension(self, layout: sql.Layout, size: int) -> str:
        config = self._config
        return (
            f"wrong dimension: column {config.table}.{config.vector_column} is "
            f"{layout.kind}({layout.dimensions}) but the embedding {config.embedding} gives "
            f"{size} numbers; embed with a model of {layout.dimensions} dimensions (or set "
            f"dimensions: {layout.dimensions} under embeddings.{config.embedding} if it can), "
            f"or point vector_column: at a column of {size}"
        )

    def _failure(self, error: sa_exc.DBAPIError) -> QueryFailed:
        """The outcome and reason of a driver error (``pgvector_errors``)."""
        failure = driver_failure(error, self._config, len(self._sent[0]) if self._sent else None)
        if failure.outcome == "bad_response":
            self._layout = None  # the table may have changed: look it up again next time
        return failure

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
            # Ids are the table's data, never redacted (acme-doc-1 stays so when acme is a
            # secret); one that is a secret is refused, so that none is ever stored.
            if self._redact.is_secret(doc_id):
                raise QueryFailed(
                    "bad_response",
                    f"row {rank}: {id_column} is the value of a secret (a password or a "
                    "${VAR}), which is never stored; point id_column: at the document's id",
                )
            ids.append(doc_id)
            scores.append(float(distance))
        return tuple(ids), tuple(scores)
