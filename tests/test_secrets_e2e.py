"""Secrets and what a target returns, end to end: real retrievers on 127.0.0.1, real commands.

Three promises: an id a target returns is its data and is stored as returned, even when it
holds a secret's characters (one that *is* a secret is refused); a secret a target echoes
escaped (``\\/``, ``\\uXXXX``) is masked like the plain one; a URL with ``user:password@``
authenticates with HTTP Basic and its password shows up nowhere.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_harness import DaemonProcess, config_yaml, free_port, running
from retrievers import FakeRetriever, ServerThread, target_entry, toy_vector

API_KEY = "sk-e2e-41c9a7d2"
TENANT = "acme"
# Base64 API keys hold "/" and "+": PHP's json_encode echoes them as "\/".
SLASHED_KEY = "sk/live+Zm9v/Yg3Tq=="
USER, PASSWORD = "reader", "pw-e2e-7f31c0d9"
EMBED_USER, EMBED_PASSWORD = "embedder", "pw-e2e-embed-5b82"
RUNS_S = 60.0

# Every document id starts with the tenant, as multi-tenant stores often name them.
CORPUS = {
    "reset password": [("acme-doc-1", 0.93), ("acme-doc-2", 0.81), ("acme-doc-3", 0.44)],
    "pricing plans": [("acme-doc-4", 0.88), ("acme-doc-1", 0.52)],
}
SUITE = {
    "cases": [
        {"id": "reset", "query": "reset password", "relevant": ["acme-doc-1"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["acme-doc-4"]},
    ]
}


def ragcanary(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragcanary", *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_config(
    directory: Path, targets: dict[str, Any], suite: dict[str, Any] = SUITE, **extra: Any
) -> Path:
    core = {"cases": "suite.yaml", "targets": list(targets), "every": "1s", "k": [1, 3]}
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "targets": targets,
        "suites": {"core": core},
        **extra,
    }
    (directory / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    path = directory / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return path


# --- ids are the target's data -----------------------------------------------------------------


@pytest.fixture
def tenant_retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=CORPUS, api_key=API_KEY) as retriever:
        yield retriever


def _tenant_target(url: str) -> dict[str, Any]:
    target = target_entry(url, timeout="5s", retries=0)
    target["headers"]["X-Tenant"] = "${TENANT}"
    return target


ENV = {"VENDOR_KEY": API_KEY, "TENANT": TENANT}


def test_ids_holding_a_header_secret_score_and_are_stored_as_returned(
    tmp_path: Path, tenant_retriever: FakeRetriever
) -> None:
    """`run`: X-Tenant is "acme" and every id starts with "acme-": a perfect retriever scores
    Hit@k 1, and the report keeps "acme-doc-1" (it once held "***-doc-1" and scored 0)."""
    config = write_config(tmp_path, {"vendor": _tenant_target(tenant_retriever.url)})
    report_path = tmp_path / "report.json"
    result = ragcanary(
        "run", "-c", str(config), "--report", str(report_path), cwd=tmp_path, env=ENV
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["metrics"]["hit_rate@1"] == 1.0
    assert report["metrics"]["mrr"] == 1.0
    assert [case["ids"] for case in report["cases"]] == [
        ["acme-doc-1", "acme-doc-2", "acme-doc-3"],
        ["acme-doc-4", "acme-doc-1"],
    ]
    assert tenant_retriever.requests[0].headers["X-Tenant"] == TENANT


def test_validate_live_and_bootstrap_show_the_ids_as_returned(
    tmp_path: Path, tenant_retriever: FakeRetriever
) -> None:
    """The first hits `validate --live` prints and a `bootstrap` draft's listed results."""
    config = write_config(tmp_path, {"vendor": _tenant_target(tenant_retriever.url)})
    live = ragcanary("validate", "--live", "-c", str(config), cwd=tmp_path, env=ENV)
    assert live.returncode == 0, live.stdout + live.stderr
    assert "acme-doc-1" in live.stdout
    (tmp_path / "queries.txt").write_text("reset password\n", encoding="utf-8")
    args = ("bootstrap", "-c", str(config), "--target", "vendor", "--queries", "queries.txt")
    draft = ragcanary(*args, cwd=tmp_path, env=ENV)
    assert draft.returncode == 0, draft.stdout + draft.stderr
    assert "acme-doc-1" in draft.stdout
    assert "acme-doc-3" in draft.stdout
    assert "***" not in live.stdout + draft.stdout


def test_serve_stores_and_shows_the_ids_as_returned(
    tmp_path: Path, tenant_retriever: FakeRetriever
) -> None:
    """`serve`: the gauge, the stored run (API) and the case's page show the ids sent."""
    port = free_port()
    target = _tenant_target(tenant_retriever.url)
    config = write_config(tmp_path, {"vendor": target}, listen=f"127.0.0.1:{port}")
    with running(DaemonProcess(config, port, ENV)) as daemon:
        scrape = daemon.wait_runs("core", "vendor", 1, RUNS_S)
        assert scrape.number("ragcanary_hit_rate", suite="core", target="vendor", k="1") == 1.0
        [run] = daemon.get("/api/v1/runs", suite="core", target="vendor", limit=1).json()["runs"]
        report = daemon.get(f"/api/v1/runs/{run['run_id']}").json()
        page = daemon.get("/ui/case", suite="core", case="reset", target="vendor")
    assert report["cases"][0]["ids"] == ["acme-doc-1", "acme-doc-2", "acme-doc-3"]
    assert page.status_code == 200
    assert "<code>acme-doc-1</code>" in page.text
    assert "***-doc" not in page.text + json.dumps(report)


def test_an_id_that_is_a_secret_is_refused_and_never_stored(
    tmp_path: Path, tenant_retriever: FakeRetriever
) -> None:
    """A hit whose id is the tenant itself (a field echoing the request) fails that query as
    bad_response, and neither the report nor the terminal shows the value."""
    tenant = "tenant-77c1"
    tenant_retriever.corpus = {**CORPUS, "pricing plans": [("acme-doc-4", 0.88), (tenant, 0.5)]}
    config = write_config(tmp_path, {"vendor": _tenant_target(tenant_retriever.url)})
    report_path = tmp_path / "report.json"
    env = {**ENV, "TENANT": tenant}
    result = ragcanary(
        "run", "-c", str(config), "--report", str(report_path), cwd=tmp_path, env=env
    )
    assert result.returncode == 3, result.stdout + result.stderr  # half the cases answered
    text = report_path.read_text()
    reset, pricing = json.loads(text)["cases"]
    assert reset["ids"] == ["acme-doc-1", "acme-doc-2", "acme-doc-3"]
    assert (pricing["outcome"], pricing["ids"]) == ("bad_response", [])
    assert "data.matches[1]" in pricing["error"]
    assert "secret" in pricing["error"]
    assert tenant not in text + result.stdout + result.stderr


# --- secrets echoed escaped --------------------------------------------------------------------


class _PhpStyleHandler(BaseHTTPRequestHandler):
    """A 401 whose JSON error quotes the key as PHP's json_encode writes it: "/" as "\\/"."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("X-Api-Key", "")
        data = json.dumps({"error": f"API key {key} is revoked"}).replace("/", "\\/").encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_key_echoed_json_escaped_is_masked_in_everything_stored_and_shown(
    tmp_path: Path,
) -> None:
    serving = ServerThread(_PhpStyleHandler)
    try:
        url = f"http://127.0.0.1:{serving.address[1]}/search"
        config = write_config(tmp_path, {"php": target_entry(url, timeout="5s", retries=0)})
        report_path = tmp_path / "report.json"
        result = ragcanary(
            "run",
            "-c",
            str(config),
            "--report",
            str(report_path),
            cwd=tmp_path,
            env={"VENDOR_KEY": SLASHED_KEY},
        )
    finally:
        serving.stop()
    assert result.returncode == 3, result.stdout + result.stderr
    text = report_path.read_text()
    error = json.loads(text)["cases"][0]["error"]
    assert error.startswith("HTTP 401")
    assert "API key *** is revoked" in error
    escaped = SLASHED_KEY.replace("/", "\\/")
    for shown in (text, result.stdout, result.stderr):
        assert "Zm9v" not in shown, shown
        assert "Yg3Tq" not in shown, shown
        assert escaped not in shown
        assert SLASHED_KEY not in shown


# --- credentials in a URL ----------------------------------------------------------------------


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Guarded:
    """A retriever (``POST /search``) and an embeddings endpoint (``POST /v1/embeddings``)
    on 127.0.0.1 that answer only HTTP Basic with their own user and password.

    A refused request gets a 401 whose JSON quotes the Authorization header it was sent, as
    careless servers do. ``seen`` records (path, Authorization, the request line's target).
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str]] = []
        guarded = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                auth = self.headers.get("Authorization")
                guarded.seen.append((self.path, auth, self.requestline))
                if self.path == "/v1/embeddings":
                    if auth != _basic(EMBED_USER, EMBED_PASSWORD):
                        return self._send(401, {"error": {"message": f"bad credentials {auth}"}})
                    data = [
                        {"index": i, "embedding": toy_vector(text, 8)}
                        for i, text in enumerate(body["input"])
                    ]
                    return self._send(200, {"data": data})
                if auth != _basic(USER, PASSWORD):
                    return self._send(401, {"error": f"bad credentials {auth}"})
                assert len(body["vector"]) == 8
                ranked = CORPUS.get(body["q"], [])[: body["limit"]]
                return self._send(200, {"hits": [{"id": i, "score": s} for i, s in ranked]})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serving = ServerThread(Handler)

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self._serving.address[1]}"

    def stop(self) -> None:
        self._serving.stop()


@pytest.fixture
def guarded() -> Iterator[Guarded]:
    server = Guarded()
    try:
        yield server
    finally:
        server.stop()


CREDENTIALS = {
    "SEARCH_PASSWORD": PASSWORD,
    "EMBED_PASSWORD": EMBED_PASSWORD,
    "WRONG_PASSWORD": "pw-e2e-wrong-c64e",
}
HIDDEN = (
    PASSWORD,
    EMBED_PASSWORD,
    "pw-e2e-wrong-c64e",
    _basic(USER, PASSWORD).split()[1],
    _basic(EMBED_USER, EMBED_PASSWORD).split()[1],
    _basic(USER, "pw-e2e-wrong-c64e").split()[1],
)


def _credentialed_config(directory: Path, guarded: Guarded, **extra: Any) -> Path:
    """Target ``kb`` and its embedding authenticate by URL; ``wrong`` has a wrong password."""
    body = {"q": "{query}", "limit": "{k}", "vector": "{vector}"}

    def target(password: str) -> dict[str, Any]:
        url = f"http://{USER}:${{{password}}}@{guarded.base}/search"
        return {"url": url, "body": body, "embedding": "toy", "timeout": "5s", "retries": 0}

    embeddings = {
        "toy": {
            "url": f"http://{EMBED_USER}:${{EMBED_PASSWORD}}@{guarded.base}/v1/embeddings",
            "model": "toy-1",
            "retries": 0,
        }
    }
    targets = {"kb": target("SEARCH_PASSWORD"), "wrong": target("WRONG_PASSWORD")}
    return write_config(directory, targets, embeddings=embeddings, **extra)


def _assert_hidden(text: str, where: str) -> None:
    for secret in HIDDEN:
        assert secret not in text, f"{secret!r} in {where}: {text}"


def test_url_credentials_authenticate_with_basic_and_never_show(
    tmp_path: Path, guarded: Guarded
) -> None:
    """`validate --live` and `run`: the target and its embedding endpoint get HTTP Basic from
    their URLs' user:password (every query failed as connect_error before), the URL sent has
    no userinfo, and no password or Basic token reaches the terminal or the report; a wrong
    password is an http_4xx whose echoed header is masked."""
    config = _credentialed_config(tmp_path, guarded)
    live = ragcanary("validate", "--live", "-c", str(config), cwd=tmp_path, env=CREDENTIALS)
    output = live.stdout + live.stderr
    assert "kb: ok" in output, output
    assert f"POST http://{guarded.base}/search" in output
    _assert_hidden(output, "validate --live")

    report_path = tmp_path / "report.json"
    run = ragcanary(
        "run",
        "-c",
        str(config),
        "--target",
        "kb",
        "--report",
        str(report_path),
        cwd=tmp_path,
        env=CREDENTIALS,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(report_path.read_text())
    assert report["metrics"]["hit_rate@1"] == 1.0

    wrong_path = tmp_path / "wrong.json"
    wrong = ragcanary(
        "run",
        "-c",
        str(config),
        "--target",
        "wrong",
        "--report",
        str(wrong_path),
        cwd=tmp_path,
        env=CREDENTIALS,
    )
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    error = json.loads(wrong_path.read_text())["cases"][0]["error"]
    assert error.startswith("HTTP 401")
    assert "bad credentials Basic ***" in error

    for text, where in [
        (run.stdout + run.stderr, "run"),
        (report_path.read_text(), "report"),
        (wrong.stdout + wrong.stderr, "run of wrong"),
        (wrong_path.read_text(), "report of wrong"),
    ]:
        _assert_hidden(text, where)
    assert {auth for path, auth, _ in guarded.seen if path == "/search"} == {
        _basic(USER, PASSWORD),
        _basic(USER, "pw-e2e-wrong-c64e"),
    }
    assert {auth for path, auth, _ in guarded.seen if path == "/v1/embeddings"} == {
        _basic(EMBED_USER, EMBED_PASSWORD)
    }
    assert not [line for _, _, line in guarded.seen if "@" in line]


def test_serve_authenticates_by_url_and_its_log_and_api_never_show_the_password(
    tmp_path: Path, guarded: Guarded
) -> None:
    port = free_port()
    config = _credentialed_config(tmp_path, guarded, listen=f"127.0.0.1:{port}")
    with running(DaemonProcess(config, port, CREDENTIALS)) as daemon:
        scrape = daemon.wait_runs("core", "kb", 1, RUNS_S, outcome="ok")
        daemon.wait_runs("core", "wrong", 1, RUNS_S)
        assert scrape.number("ragcanary_hit_rate", suite="core", target="kb", k="1") == 1.0
        runs = daemon.get("/api/v1/runs", limit=100).json()["runs"]
        responses = [daemon.get(f"/api/v1/runs/{run['run_id']}") for run in runs]
        responses += [daemon.get(f"/ui/runs/{run['run_id']}") for run in runs]
        responses += [daemon.get(path) for path in ("/metrics", "/api/v1/jobs", "/ui/")]
    assert any("Basic ***" in response.text for response in responses)  # wrong's echo
    for response in responses:
        _assert_hidden(response.text, str(response.request.url))
    _assert_hidden(daemon.log, "the daemon's log")
    assert "Traceback" not in daemon.log


def test_url_credentials_beside_an_authorization_header_are_a_located_error(
    tmp_path: Path, guarded: Guarded
) -> None:
    """Two credentials for one request: `validate` names the file, field and line, and the
    fix, without the password."""
    config = _credentialed_config(tmp_path, guarded)
    data = yaml.safe_load(config.read_text())
    data["targets"]["kb"]["headers"] = {"authorization": "Bearer ${EMBED_PASSWORD}"}
    config.write_text(config_yaml(data), encoding="utf-8")
    result = ragcanary("validate", "-c", str(config), cwd=tmp_path, env=CREDENTIALS)
    assert result.returncode == 2, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "targets.kb.url" in output
    assert "line " in output
    assert "Authorization" in output
    _assert_hidden(output, "validate")
