"""Database fixtures: a SQLite file per test, and a fresh schema per test on local PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from hypothesis import settings
from sqlalchemy.pool import NullPool

from ragcanary.store.storage import Store

# The unit and e2e lanes (which tests start servers, and the guard that keeps the rest pure);
# pytester runs small suites under them (tests/test_lanes.py).
pytest_plugins = ("lanes", "pytester")

# No property test has a deadline: how long an example takes is the benchmarks' to measure
# (bench/), and on a loaded 2-core machine one example of a suite's round trip took 520 ms
# against hypothesis's default of 200 ms, failing a test whose property held.
settings.register_profile("ragcanary", deadline=None)
settings.load_profile("ragcanary")

POSTGRES_URL = os.environ.get(
    "RAGCANARY_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The local PostgreSQL's URL; skips when it is unreachable (fails under CI's REQUIRE flag)."""
    engine = sqlalchemy.create_engine(
        POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3}
    )
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        first_line = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        reason = (
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({first_line}); start it, or set "
            "RAGCANARY_TEST_POSTGRES to another URL"
        )
        if os.environ.get("RAGCANARY_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (RAGCANARY_REQUIRE_POSTGRES=1 forbids skipping)")
        pytest.skip(reason)
    finally:
        engine.dispose()
    return POSTGRES_URL


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose connections see only a new, empty schema, dropped after the test."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    admin = sqlalchemy.create_engine(postgres_server, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    url = sqlalchemy.make_url(postgres_server).update_query_dict(
        {"options": f"-csearch_path={schema}"}
    )
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL of a SQLite file that does not exist yet, in a directory of its own."""
    directory = tmp_path / "db"
    directory.mkdir()
    return f"sqlite:///{directory / 'ragcanary.db'}"


# The PostgreSQL variant is end-to-end (a server), the SQLite one stays in the unit lane.
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)])
def store_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty database, once on SQLite and once on PostgreSQL."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated, empty Store on each backend, closed after the test."""
    with Store.from_url(store_url) as store:
        store.migrate()
        yield store
