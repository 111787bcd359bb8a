"""A pgvector target's config: a dsn instead of a url, plain SQL names, one where condition."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragcanary.config.sql import condition_problem, is_identifier, is_table_name
from ragcanary.errors import ConfigError, Problem
from ragcanary.suites.loaded import load_config

PGVECTOR = {
    "preset": "pgvector",
    "dsn": "postgresql+psycopg://reader:${PG_PASSWORD}@db:5432/app",
    "table": "chunks",
    "id_column": "doc_id",
    "vector_column": "embedding",
    "embedding": "minilm",
}
ENV = {"PG_PASSWORD": "pg-Secret-42"}


def _load(tmp_path: Path, **target: object) -> list[Problem]:
    """The problems of a config whose one target is ``PGVECTOR`` changed by ``target``."""
    (tmp_path / "core.yaml").write_text("cases:\n  - {id: a, query: q, relevant: [x]}\n")
    fields = {key: value for key, value in (PGVECTOR | target).items() if value is not None}
    config = {
        "embeddings": {"minilm": {"url": "http://embedder:8080/v1/embeddings", "model": "m"}},
        "targets": {"kb": fields},
        "suites": {"core": {"cases": "core.yaml", "targets": ["kb"]}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    try:
        load_config(path, ENV)
    except ConfigError as exc:
        return exc.problems
    return []


def test_a_pgvector_target_loads_with_distances_as_its_score_order(tmp_path: Path) -> None:
    assert _load(tmp_path, where="tenant = 'acme'", distance="inner_product") == []
    path = tmp_path / "ragcanary.yaml"
    loaded = load_config(path, ENV)
    target = loaded.config.targets["kb"]
    assert (target.score_order, target.distance, target.url) == ("asc", "inner_product", "")
    assert "pg-Secret-42" in loaded.secrets


@pytest.mark.parametrize(
    ("change", "path", "message", "fix"),
    [
        (
            {"url": "http://db:5432"},
            "targets.kb.url",
            "url does not apply to the pgvector preset",
            "remove url: (connect with dsn: instead)",
        ),
        (
            {"id": "doc_id"},
            "targets.kb.id",
            "id does not apply to the pgvector preset",
            "name the column in id_column: instead",
        ),
        (
            {"dsn": None, "vector_column": None},
            "targets.kb",
            "the pgvector preset needs dsn and vector_column",
            "add dsn: postgresql+psycopg://",
        ),
        (
            {"dsn": "mysql://reader:pw@db/app"},
            "targets.kb.dsn",
            "dsn is not a postgresql:// or postgresql+psycopg:// URL",
            "write it like postgresql+psycopg://",
        ),
        (
            {"table": "chunks; DROP TABLE chunks"},
            "targets.kb.table",
            "'chunks; DROP TABLE chunks' is not a table name",
            "write a name like chunks or public.chunks",
        ),
        (
            {"vector_column": 'embedding"'},
            "targets.kb.vector_column",
            "is not a column name",
            "write a name like doc_id",
        ),
        (
            {"where": "tenant = 'acme') --"},
            "targets.kb.where",
            "the condition has a ')' at character 16 that closes nothing it opened",
            "write one SQL condition",
        ),
        (
            {"distance": "dot"},
            "targets.kb.distance",
            "'dot' is not allowed",
            "'cosine', 'l2' or 'inner_product'",
        ),
        (
            {"score_order": "desc"},
            "targets.kb",
            "the pgvector preset's scores are distances",
            "remove score_order",
        ),
    ],
)
def test_a_pgvector_mistake_is_located_with_its_fix(
    tmp_path: Path, change: dict[str, object], path: str, message: str, fix: str
) -> None:
    (problem,) = _load(tmp_path, **change)
    assert problem.path == path
    assert message in problem.message
    assert fix in problem.fix
    assert problem.line is not None
    assert "pg-Secret-42" not in f"{problem.message} {problem.fix}"


def test_pgvector_fields_on_another_target_are_refused(tmp_path: Path) -> None:
    (problem,) = _load(tmp_path, preset="http", url="http://search:8080/q", body={"q": "{query}"})
    assert problem.path == "targets.kb.dsn"
    assert problem.message == "dsn is read by the pgvector preset only"


def test_an_http_target_still_needs_its_url(tmp_path: Path) -> None:
    (problem,) = _load(
        tmp_path,
        preset="http",
        body={"q": "{query}"},
        dsn=None,
        table=None,
        id_column=None,
        vector_column=None,
        embedding=None,
    )
    assert (problem.path, problem.message) == ("targets.kb.url", "required field is missing")
    assert problem.fix == "add url: http://127.0.0.1:8088/search"


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("chunks", True),
        ("_Docs2", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("2chunks", False),
        ("doc-id", False),
        ('doc"id', False),
        ("doc id", False),
        ("public.chunks", False),
        ("", False),
    ],
)
def test_identifiers_are_plain_names(name: str, plain: bool) -> None:
    assert is_identifier(name) is plain


@pytest.mark.parametrize(
    ("name", "valid"),
    [("chunks", True), ("public.chunks", True), ("a.b.c", False), (".chunks", False)],
)
def test_a_table_is_a_name_or_a_schema_and_a_name(name: str, valid: bool) -> None:
    assert is_table_name(name) is valid


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ("tenant = 'acme' AND NOT archived", None),
        ("(a = 1 OR b = 2) AND c IN (1, 2)", None),
        ("title <> 'it''s; -- (not) a comment'", None),
        ('"Weird;Column" = 1', None),
        (r"note = E'a \' ) ; quote'", None),
        ("tag LIKE 'a%' AND created_at > now() - interval '1 day'", None),
        ("", "is empty"),
        ("   ", "is empty"),
        ("1 = 1; DELETE FROM chunks", "has ';' at character 6"),
        ("tenant = 'acme' -- and more", "has a comment (--) at character 17"),
        ("tenant = 'acme' /* x */", "has a comment (/*) at character 17"),
        ("body = $$x$$", "has '$' at character 8"),
        ("a = 1) OR (b = 2", "has a ')' at character 6 that closes nothing it opened"),
        ("(a = 1", "has a '(' that is never closed"),
        ("tenant = 'acme", "has a ' at character 10 that is never closed"),
        ('"tenant = 1', 'has a " at character 1 that is never closed'),
        # Outside an E'' string a backslash escapes nothing: the quote after it closes.
        (r"note = 'a \' AND b = 1", None),
        (r"note = 'a \' ) x", "has a ')' at character 14 that closes nothing it opened"),
    ],
)
def test_where_is_one_balanced_condition(condition: str, problem: str | None) -> None:
    assert condition_problem(condition) == problem
