"""Header values HTTP cannot send are located config errors, never a crash at the first run.

Found by tests/config/test_fuzz_config.py: a header value outside ASCII (httpx sends header
values as ASCII bytes) built a config that loaded and then raised UnicodeEncodeError when its
target was made, and a secret holding a lone surrogate (a JSON ``"\\ud800"`` escape) crashed
the loader while it prepared to redact it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_config import ENV, VALID, problems_of, write

from ragcanary.suites.loaded import load_config


def _with_header(tmp_path: Path, value: str, *, where: str = "targets") -> Path:
    config = yaml.safe_load(VALID)
    if where == "targets":
        config["targets"]["docs-search"]["headers"] = {"X-Key": value}
    else:
        config["embeddings"] = {"e": {"url": "http://127.0.0.1:9/v1", "model": "m"}}
        config["embeddings"]["e"]["headers"] = {"X-Key": value}
    # JSON is YAML: json.dumps writes the escapes (\u00e9, \ud800) that YAML reads back.
    return write(tmp_path, json.dumps(config, indent=1))


@pytest.mark.parametrize("value", ["caf\u00e9", "\x80abc", "line\nbreak", "a\x00b"])
def test_a_header_value_http_cannot_send_is_located(tmp_path: Path, value: str) -> None:
    (problem,) = problems_of(_with_header(tmp_path, value))
    assert problem.path == "targets.docs-search.headers.X-Key"
    assert problem.line is not None
    assert "ASCII" in problem.message
    assert problem.fix


def test_an_embedding_header_is_checked_alike(tmp_path: Path) -> None:
    (problem,) = problems_of(_with_header(tmp_path, "caf\u00e9", where="embeddings"))
    assert problem.path == "embeddings.e.headers.X-Key"


def test_the_problem_never_shows_a_secret_value(tmp_path: Path) -> None:
    path = _with_header(tmp_path, "${DOCS_TOKEN}")
    (problem,) = problems_of(path, {"DOCS_TOKEN": "s3cret-\u00e9-token"})
    assert "s3cret" not in str(problem)
    assert problem.path == "targets.docs-search.headers.X-Key"


def test_a_secret_with_a_lone_surrogate_is_a_located_problem(tmp_path: Path) -> None:
    (problem,) = problems_of(_with_header(tmp_path, "tok\ud800en"))
    assert problem.path == "targets.docs-search.headers.X-Key"


def test_printable_ascii_values_still_load(tmp_path: Path) -> None:
    loaded = load_config(_with_header(tmp_path, "Bearer abc-123_~!*'();:@&=+$,/?#[]"), ENV)
    assert loaded.config.targets["docs-search"].headers["X-Key"].startswith("Bearer")
