"""A URL's ``user:password@``: HTTP Basic for its target or embedding endpoint, its password a
secret, and a located error when ``headers`` also sets Authorization."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from test_config import VALID, problems_of, write

from ragcanary.config.credentials import as_basic_auth
from ragcanary.suites.loaded import load_config

ENV = {"DOCS_TOKEN": "s3cret-token", "SEARCH_PASSWORD": "p%40ss-w0rd"}
URL = "http://reader:${SEARCH_PASSWORD}@127.0.0.1:8088/search"


def _config(tmp_path: Path, *, where: str = "targets", authorization: str | None = None) -> Path:
    config = yaml.safe_load(VALID)
    target = config["targets"]["docs-search"]
    target.pop("headers")
    if where == "targets":
        target["url"] = URL
        entry = target
    else:
        entry = {"url": URL.replace("/search", "/v1/embeddings"), "model": "m"}
        config["embeddings"] = {"e": entry}
    if authorization is not None:
        entry["headers"] = {"X-Other": "x", authorization: "Bearer ${DOCS_TOKEN}"}
    return write(tmp_path, yaml.safe_dump(config, sort_keys=False))


@pytest.mark.parametrize("where", ["targets", "embeddings"])
def test_the_password_and_the_basic_token_are_secrets(tmp_path: Path, where: str) -> None:
    """As written (percent-encoded), as sent (decoded), and as base64 in the header."""
    loaded = load_config(_config(tmp_path, where=where), ENV)
    token = base64.b64encode(b"reader:p@ss-w0rd").decode()
    assert {"p%40ss-w0rd", "p@ss-w0rd", token} <= loaded.secrets


@pytest.mark.parametrize("where", ["targets", "embeddings"])
@pytest.mark.parametrize("name", ["Authorization", "authorization"])
def test_url_credentials_beside_an_authorization_header_are_located(
    tmp_path: Path, where: str, name: str
) -> None:
    (problem,) = problems_of(_config(tmp_path, where=where, authorization=name), ENV)
    section = "targets.docs-search" if where == "targets" else "embeddings.e"
    assert problem.path == f"{section}.url"
    assert problem.line is not None
    assert "Authorization" in problem.message
    assert "user:password" in problem.fix
    assert "p%40ss" not in str(problem)
    assert "p@ss" not in str(problem)


@pytest.mark.parametrize(
    ("url", "sent", "authorization"),
    [
        ("http://h:8/x?q=1", "http://h:8/x?q=1", None),
        ("http://u:p%40s%2Fw@h:8/x?q=1#f", "http://h:8/x?q=1#f", "u:p@s/w"),
        ("http://u@h/x", "http://h/x", "u:"),  # a user alone: a token as curl sends it
        ("http://@h/x", "http://h/x", None),  # an empty userinfo is none, and goes
        ("https://u:p@[::1]:443/x", "https://[::1]:443/x", "u:p"),
        ("http://u:p@ss@h/x", "http://h/x", "u:p@ss"),  # the last @ ends the userinfo
    ],
)
def test_a_url_s_credentials_leave_it_as_a_basic_header(
    url: str, sent: str, authorization: str | None
) -> None:
    got_url, headers = as_basic_auth(url, {"X-Other": "x"})
    assert got_url == sent
    if authorization is None:
        assert headers == {"X-Other": "x"}
    else:
        token = base64.b64encode(authorization.encode()).decode()
        assert headers == {"Authorization": f"Basic {token}", "X-Other": "x"}
