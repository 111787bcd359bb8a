"""pgvector's SQL: the engine, the catalog lookups and the statements the preset sends.

Statements are built with SQLAlchemy Core from the config's identifiers (checked as plain
names by the config model, quoted here as PostgreSQL needs them); the vector, ``k`` and the
ids are bound parameters. ``where`` is the operator's own SQL (trusted config, like the dsn
beside it; see docs/targets.md), wrapped in parentheses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sqlalchemy
from sqlalchemy import (
    BigInteger,
    Engine,
    Float,
    Select,
    TableClause,
    Text,
    any_,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, psycopg
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.types import UserDefinedType

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets.lookup import integers, uuids

OPERATORS = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
VECTOR_TYPES = ("vector", "halfvec")  # pgvector's dense types: the query is cast to the column's
INTEGER_TYPES = ("int2", "int4", "int8")  # id columns whose ids are bound as integers
TEXT_TYPES = ("text", "varchar", "name", "citext")  # and those compared with text as they are
MIN_CONNECT_TIMEOUT_S = 2  # libpq reads 1 as 2 and 0 as no deadline at all
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
}
# How validate --live shows the SQL: ":vector" reads better than psycopg's "%(vector)s".
SHOWN = psycopg.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
SET_TIMEOUT = select(func.set_config("statement_timeout", bindparam("ms"), True))
COLUMNS = text(
    "SELECT a.attname, t.typname, a.atttypmod"
    " FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid"
    " WHERE a.attrelid = to_regclass(:relation) AND a.attnum > 0 AND NOT a.attisdropped"
    " ORDER BY a.attnum"
)
VECTOR_TABLES = text(
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


class VectorType(UserDefinedType[list[float]]):
    """pgvector's ``vector`` or ``halfvec``, the type the bound query vector is cast to."""

    cache_ok = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_col_spec(self, **_: Any) -> str:
        return self.name


@dataclass(frozen=True)
class Layout:
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


def nearest(table: TableClause, config: TargetConfig, kind: str) -> Select[Any]:
    """SELECT id, distance ... ORDER BY distance LIMIT :k, the vector cast to ``kind``."""
    assert config.id_column is not None
    assert config.vector_column is not None
    operator = OPERATORS[config.distance]
    query_vector = cast(bindparam("vector"), VectorType(kind))
    distance = table.c[config.vector_column].op(operator, return_type=Float)(query_vector)
    statement = select(table.c[config.id_column].label("id"), distance.label("score"))
    if config.where is not None:
        # Trusted config, checked to be one balanced condition; read-only and timed out.
        statement = statement.where(literal_column(f"({config.where})"))
    return statement.order_by(distance).limit(bindparam("k"))


def distances(
    table: TableClause, config: TargetConfig, kind: str, id_kind: str, ids: list[str]
) -> tuple[Select[Any], list[Any]] | None:
    """The statement giving each of ``ids`` that rows the search sees hold its smallest
    distance to ``:vector`` (the search's own operator, computed row by row: exact, whatever
    index the table has), and the bound ids; None when no id can be held."""
    found = held(table, config, id_kind, ids)
    if found is None:
        return None
    statement, values = found
    assert config.vector_column is not None
    query_vector = cast(bindparam("vector"), VectorType(kind))
    operator = OPERATORS[config.distance]
    distance = table.c[config.vector_column].op(operator, return_type=Float)(query_vector)
    id_column = statement.selected_columns[0]
    return statement.add_columns(func.min(distance)).group_by(id_column), values


def held(
    table: TableClause, config: TargetConfig, id_kind: str, ids: list[str]
) -> tuple[Select[Any], list[Any]] | None:
    """The statement selecting which of ``ids`` rows the search sees hold
    (``WHERE id = ANY(:ids)``, the ids bound as the id column's type), and the bound ids;
    None when no id can be held by a column of that type."""
    assert config.id_column is not None
    assert config.vector_column is not None
    id_column: Any = table.c[config.id_column]
    array, values = _id_array(id_kind, ids)
    if not values:
        return None
    if id_kind not in (*TEXT_TYPES, *INTEGER_TYPES, "uuid"):
        id_column = cast(id_column, Text)  # compared as the search prints it
    statement = select(id_column).where(id_column == any_(cast(bindparam("ids"), array)))
    statement = statement.where(table.c[config.vector_column].is_not(None))
    if config.where is not None:
        statement = statement.where(literal_column(f"({config.where})"))
    return statement, values


def _id_array(kind: str, ids: list[str]) -> tuple[ARRAY[Any], list[Any]]:
    """The array type ``:ids`` is cast to for an id column of type ``kind``, and the ids a
    column of that type can hold (``7`` for an integer column, a UUID for a uuid one)."""
    if kind in INTEGER_TYPES:
        return ARRAY(BigInteger), [i for i in integers(ids) if -(2**63) <= i < 2**63]
    if kind == "uuid":
        return ARRAY(PG_UUID(as_uuid=False)), uuids(ids)
    return ARRAY(Text), ids
