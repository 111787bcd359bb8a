"""A generic target's `lookup:`: where its template points; each mistake located, with its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragcanary.config.lookup import resolve_lookup
from ragcanary.config.target import TargetConfig
from ragcanary.errors import ConfigError
from ragcanary.suites.loaded import load_config

URL = "http://search.internal:8080/v2/query?tenant=acme"
CONFIG = """\
targets:
  kb:
    url: http://search.internal:8080/v2/query
{target}
suites:
  core: {{cases: core.yaml, targets: [kb]}}
"""


@pytest.mark.parametrize(
    ("template", "resolved"),
    [
        ("/docs/{id}", "http://search.internal:8080/docs/{id}"),
        ("docs/{id}", "http://search.internal:8080/v2/docs/{id}"),
        ("../docs/{id}", "http://search.internal:8080/docs/{id}"),
        ("?doc={id}", "http://search.internal:8080/v2/query?doc={id}"),
        ("https://docs.internal/v1/{id}", "https://docs.internal/v1/{id}"),
        ("//docs.internal/{id}", "http://docs.internal/{id}"),
    ],
)
def test_a_template_resolves_against_the_url_like_a_link(template: str, resolved: str) -> None:
    assert resolve_lookup(URL, template) == resolved


def test_a_generic_target_keeps_its_template_as_written() -> None:
    config = TargetConfig(url=URL, lookup="/docs/{id}")
    assert config.lookup == "/docs/{id}"
    assert TargetConfig(url=URL).lookup is None


@pytest.mark.parametrize(
    ("fields", "message", "fix"),
    [
        pytest.param(
            {"preset": "qdrant", "collection": "docs", "embedding": "m"},
            "lookup is for the generic http target; the qdrant preset looks ids up through "
            "its own API",
            "remove lookup:",
            id="preset",
        ),
        pytest.param(
            {"lookup": "/docs/"},
            "lookup has no {id}: every id would be asked at the same URL",
            "write it like lookup: /docs/{id} (resolved against url) or "
            "https://search.internal/docs/{id}",
            id="no-id",
        ),
        pytest.param(
            {"lookup": "/docs/{doc_id}?v={version}"},
            "lookup fills in {id} only; {doc_id}, {version} would be sent as written",
            "write {id} where the document id goes",
            id="other-placeholder",
        ),
        pytest.param(
            {"lookup": "ftp://files.internal/{id}"},
            "lookup 'ftp://files.internal/{id}' is not an http(s) URL or a path",
            "write it like lookup: /docs/{id} (resolved against url) or "
            "https://search.internal/docs/{id}",
            id="scheme",
        ),
        pytest.param(
            {"lookup": "https://{id}.docs.internal/"},
            "lookup puts {id} in the host; the id goes in the path or the query",
            "write it like lookup: /docs/{id} (resolved against url) or "
            "https://search.internal/docs/{id}",
            id="host",
        ),
        pytest.param(
            {"lookup": "https://reader:pw@docs.internal/{id}"},
            "lookup holds a user or password; a lookup is sent with the target's own "
            "credentials (its headers, and url's user:password@)",
            "remove user:password@ from lookup",
            id="credentials",
        ),
    ],
)
def test_a_lookup_mistake_says_what_to_write(
    fields: dict[str, Any], message: str, fix: str
) -> None:
    given = {"url": URL, "lookup": "/docs/{id}"} | fields
    with pytest.raises(ValidationError) as raised:
        TargetConfig(**given)
    [error] = raised.value.errors()
    assert error["msg"] == message
    assert error["ctx"] is not None
    assert (error["ctx"]["fix"], error["ctx"]["at"]) == (fix, ("lookup",))


@pytest.mark.parametrize(
    ("target", "line", "message"),
    [
        pytest.param(
            '    body: {q: "{query}"}\n    lookup: "/docs/"',
            5,
            "lookup has no {id}: every id would be asked at the same URL",
            id="no-id",
        ),
        pytest.param(
            "    preset: elasticsearch\n    collection: docs\n    text_field: body\n"
            '    lookup: "/docs/{id}"',
            7,
            "lookup is for the generic http target; the elasticsearch preset looks ids up "
            "through its own API",
            id="preset",
        ),
    ],
)
def test_a_lookup_problem_names_its_path_and_line(
    tmp_path: Path, target: str, line: int, message: str
) -> None:
    (tmp_path / "core.yaml").write_text("cases:\n  - {id: a, query: q, relevant: [x]}\n")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(target=target), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    [problem] = raised.value.problems
    assert (problem.path, problem.line, problem.message) == ("targets.kb.lookup", line, message)
    assert problem.fix.startswith(("write it like lookup:", "remove lookup:"))
