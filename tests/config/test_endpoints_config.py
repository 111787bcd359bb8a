"""A target's ``endpoints:``: other URLs of its index, each mistake located at its entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcanary.errors import ConfigError, Problem
from ragcanary.suites.loaded import load_config

CONFIG = """\
embeddings:
  minilm: {{url: http://embedder:8080/v1/embeddings, model: all-MiniLM-L6-v2}}
targets:
  kb:
{target}
suites:
  core: {{cases: core.yaml, targets: [kb]}}
"""
HTTP = "    url: http://search:8088/search\n    body: {q: '{query}'}\n"


def _write(tmp_path: Path, target: str) -> Path:
    (tmp_path / "core.yaml").write_text("cases:\n  - {id: a, query: q, relevant: [x]}\n")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(target=target), encoding="utf-8")
    return path


def _problem(tmp_path: Path, target: str) -> Problem:
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path, target), {})
    [problem] = raised.value.problems
    return problem


def test_endpoints_are_read_by_name_in_order(tmp_path: Path) -> None:
    target = (
        HTTP
        + "    endpoints:\n      eu-west.1: http://eu:8088/search\n      us_2: http://us:8088/search\n"
    )
    loaded = load_config(_write(tmp_path, target), {})
    endpoints = loaded.config.targets["kb"].endpoints
    assert list(endpoints.items()) == [
        ("eu-west.1", "http://eu:8088/search"),
        ("us_2", "http://us:8088/search"),
    ]


def test_a_password_in_an_endpoint_url_is_a_secret(tmp_path: Path) -> None:
    target = HTTP + "    endpoints: {eu: 'http://reader:s3cret-pw@eu:8088/search'}\n"
    loaded = load_config(_write(tmp_path, target), {})
    assert "s3cret-pw" in loaded.secrets


@pytest.mark.parametrize(
    ("target", "path", "line", "message", "fix"),
    [
        pytest.param(
            HTTP + "    endpoints:\n      eu west: http://eu:8088/search",
            "targets.kb.endpoints.eu west",
            8,
            "'eu west' cannot name an endpoint: it becomes a metric label and a report key",
            "write up to 63 letters, digits, '_', '.' or '-', starting with a letter or digit "
            "(like eu-west or replica-2)",
            id="name-not-label-safe",
        ),
        pytest.param(
            HTTP + "    endpoints:\n      eu: eu:8088/search",
            "targets.kb.endpoints.eu",
            8,
            "'eu:8088/search' is not an http(s) URL",
            "write the replica's full URL like http://127.0.0.1:8088/search",
            id="not-a-url",
        ),
        pytest.param(
            HTTP + "    endpoints:\n      eu: [http://eu:8088/search]",
            "targets.kb.endpoints.eu",
            8,
            "expected text, got a list",
            "write text, in quotes if it could be read as a number or date",
            id="not-text",
        ),
        pytest.param(
            HTTP + "    endpoints:\n      same: http://search:8088/search",
            "targets.kb.endpoints.same",
            8,
            "this is the target's own url: its answers would be compared with themselves",
            "write another replica's URL, or remove the endpoint",
            id="own-url",
        ),
        pytest.param(
            HTTP + "    headers: {Authorization: Bearer t0ken}\n"
            "    endpoints:\n      eu: http://u:p@eu:8088/search",
            "targets.kb.endpoints.eu",
            9,
            "the URL carries user:password, which is sent as Authorization: Basic, and headers "
            "sets Authorization too; a request takes one",
            "remove user:password@ from the URL, or the Authorization header",
            id="two-credentials",
        ),
        pytest.param(
            "    preset: chroma\n    url: http://chroma:8000\n    collection: docs\n"
            "    embedding: minilm\n    endpoints:\n      eu: http://chroma-eu:8000/api/v2",
            "targets.kb.endpoints.eu",
            10,
            "'http://chroma-eu:8000/api/v2' ends in /api/v2, which the chroma preset adds "
            "/api/v2 itself",
            "write eu: http://chroma-eu:8000, the server's root",
            id="chroma-api-prefix",
        ),
        pytest.param(
            "    preset: pgvector\n    dsn: postgresql+psycopg://reader@db/app\n"
            "    table: chunks\n    id_column: doc_id\n    vector_column: embedding\n"
            "    embedding: minilm\n    endpoints:\n      eu: http://db-eu:5432",
            "targets.kb.endpoints",
            11,
            "the pgvector preset connects with dsn, not a URL: endpoints lists other URLs",
            "remove endpoints:; to compare two databases, define a target for each and run "
            "ragcanary compare",
            id="pgvector",
        ),
    ],
)
def test_an_endpoint_mistake_is_located_with_its_fix(
    tmp_path: Path, target: str, path: str, line: int, message: str, fix: str
) -> None:
    problem = _problem(tmp_path, target)
    assert (problem.path, problem.line, problem.message, problem.fix) == (path, line, message, fix)
