"""Security end to end: no secret leaks under any failure, and TLS is verified by default.

The admin token checks (refused when missing, wrong, or when no token is set) live in
test_api.py and test_daemon.py; the non-root container in test_deploy.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from retrievers import ServerThread, target_entry

from ragcanary.config.target import TargetConfig
from ragcanary.errors import ConfigError
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.suites.loaded import load_config

API_KEY = "sk-sec-5e8a2f71c9d3"  # ${VENDOR_KEY}, sent as the X-Api-Key header
URL_PASSWORD = "pw-sec-b41d7e09"  # ${URL_PASSWORD}, in a target's URL
ADMIN_TOKEN = "adm-sec-90c2e6f1a7"
ENV = {"VENDOR_KEY": API_KEY, "URL_PASSWORD": URL_PASSWORD, "RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN}
SECRETS = (API_KEY, URL_PASSWORD, ADMIN_TOKEN)
SUITE = {"cases": [{"id": "reset", "query": "reset password", "relevant": ["doc-7"]}]}
RUNS_S = 60.0


def assert_no_secret(text: str, where: str) -> None:
    """No secret, nor 8 characters of one (a message cut short mid-secret leaks those)."""
    for secret in SECRETS:
        pieces = [secret[i : i + 8] for i in range(len(secret) - 7)]
        assert not [p for p in pieces if p in text], f"a piece of {secret!r} in {where}: {text}"


class EchoingRetriever:
    """A retriever on 127.0.0.1 that quotes the credential it was sent back in every failure.

    The path picks the failure: ``/json401`` (a JSON error), ``/html502`` (an HTML page),
    ``/badid`` (a 200 whose id is an object holding the key), ``/notjson`` (a 200 of text).
    """

    def __enter__(self) -> EchoingRetriever:
        self._serving = ServerThread(_EchoHandler)
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.stop()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._serving.address[1]}{path}"


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("X-Api-Key", "")
        auth = self.headers.get("Authorization", "")
        if self.path == "/json401":
            self._send(401, "application/json", json.dumps({"error": f"bad key {key} ({auth})"}))
        elif self.path == "/html502":
            self._send(502, "text/html", f"<html><body><p>upstream refused {key}</p></body></html>")
        elif self.path == "/badid":
            hits = [{"chunk": {"meta": {"parent_id": {"key": key}}}, "relevance": 0.9}]
            self._send(200, "application/json", json.dumps({"data": {"matches": hits}}))
        else:
            self._send(200, "text/plain", f"{key} is not allowed here")

    def _send(self, status: int, content_type: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def echoing() -> Iterator[EchoingRetriever]:
    with EchoingRetriever() as retriever:
        yield retriever


def write_config(directory: Path, echoing: EchoingRetriever, **extra: Any) -> Path:
    """Four targets that echo the key back in different ways and one with a URL password."""
    targets = {
        name: target_entry(echoing.url(f"/{name}"), timeout="5s", retries=0)
        for name in ("json401", "html502", "badid", "notjson")
    }
    # Nothing listens there: the connect error names the URL, whose password goes as Basic.
    # (Beside an Authorization header of its own it would be a config error.)
    closed = f"http://user:${{URL_PASSWORD}}@127.0.0.1:{free_port()}/search"
    targets["closed"] = target_entry(closed, timeout="5s", retries=0)
    suite = {"cases": "suite.yaml", "targets": list(targets), "every": "1s", "k": [1]}
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "targets": targets,
        "suites": {"core": suite},
        **extra,
    }
    (directory / "suite.yaml").write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    path = directory / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def ragcanary(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragcanary", *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", **ENV},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_leaks_no_secret_when_every_target_fails_with_it(
    tmp_path: Path, echoing: EchoingRetriever
) -> None:
    """`ragcanary run`: terminal, logs, report, JUnit and Markdown show the failures, not keys."""
    config = write_config(tmp_path, echoing)
    outputs = [tmp_path / name for name in ("report.json", "junit.xml", "report.md")]
    result = ragcanary(
        "run",
        "-c",
        str(config),
        "--target",
        "json401",
        "--report",
        str(outputs[0]),
        "--junit",
        str(outputs[1]),
        "--markdown",
        str(outputs[2]),
        cwd=tmp_path,
    )
    assert result.returncode == 3, result.stdout + result.stderr  # unavailable, not a regression
    report = json.loads(outputs[0].read_text())
    [case] = report["cases"]
    assert "HTTP 401" in case["error"]
    assert "***" in case["error"]  # the echoed key was there, and masked
    for text, where in [
        (result.stdout, "stdout"),
        (result.stderr, "stderr"),
        *((path.read_text(), path.name) for path in outputs),
    ]:
        assert_no_secret(text, where)


@pytest.mark.parametrize("target", ["html502", "badid", "notjson", "closed"])
def test_run_leaks_no_secret_in_any_failure_mode(
    tmp_path: Path, echoing: EchoingRetriever, target: str
) -> None:
    """An HTML error page, an id holding the key, text quoting it, a URL with a password."""
    config = write_config(tmp_path, echoing)
    report = tmp_path / "report.json"
    result = ragcanary(
        "run", "-c", str(config), "--target", target, "--report", str(report), cwd=tmp_path
    )
    assert result.returncode == 3, result.stdout + result.stderr
    [case] = json.loads(report.read_text())["cases"]
    assert case["error"], case
    for text, where in (
        (result.stdout, "stdout"),
        (result.stderr, "stderr"),
        (report.read_text(), "report"),
    ):
        assert_no_secret(text, where)


def test_config_errors_whose_value_is_a_secret_do_not_show_it(tmp_path: Path) -> None:
    """`validate`: a ${VAR} secret as a bad value, also one long enough to be shortened."""
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    target = target_entry("http://127.0.0.1:9/search")
    target |= {
        "timeout": "${VENDOR_KEY}",
        "concurrency": "x" * 60 + "${VENDOR_KEY}",
        "retries": "${URL_PASSWORD}",
        "results": "hits[${VENDOR_KEY}",
    }
    config = {
        "listen": "${RAGCANARY_ADMIN_TOKEN}",
        "storage": "postgresql+psycopg://u:${URL_PASSWORD}@127.0.0.1:1/db x",
        "targets": {"t": target},
        "suites": {"core": {"cases": "suite.yaml", "targets": ["t", "${VENDOR_KEY}"]}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = ragcanary("validate", "-c", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    output = result.stdout + result.stderr
    for field in ("timeout", "concurrency", "retries", "results", "listen", "storage", "targets"):
        assert f".{field}" in output or f"{field}:" in output, f"{field} not reported: {output}"
    assert_no_secret(output, "validate")


def test_serve_leaks_no_secret_in_logs_api_or_a_rejected_reload(
    tmp_path: Path, echoing: EchoingRetriever
) -> None:
    """`serve`: log lines, every API answer (errors too) and a reload refused over a secret."""
    port = free_port()
    config = write_config(tmp_path, echoing, listen=f"127.0.0.1:{port}")
    with running(DaemonProcess(config, port, ENV)) as daemon:
        for target in ("json401", "html502", "badid", "notjson", "closed"):
            daemon.wait_runs("core", target, 1, RUNS_S)
        runs = daemon.get("/api/v1/runs", limit=1000).json()["runs"]
        responses = [daemon.get(f"/api/v1/runs/{run['run_id']}") for run in runs]
        assert any("***" in r.text for r in responses)  # the echoed key was stored masked
        for target in ("json401", "closed"):
            responses += [
                daemon.get("/api/v1/diff", suite="core", target=target),
                daemon.get("/api/v1/history", suite="core", case="reset", target=target),
                daemon.post(f"/api/v1/baselines/core/{target}", json={}),
                daemon.post(
                    f"/api/v1/baselines/core/{target}",
                    json={"run_id": runs[0]["run_id"]},
                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                ),
            ]
        responses += [daemon.get("/api/v1/runs/nope"), daemon.get("/api/v1/history", suite="x")]
        responses += [daemon.get(path) for path in ("/metrics", "/readyz", "/api/v1/jobs")]
        # A reload whose bad value is the secret is refused; neither answer nor log shows it.
        text = config.read_text()
        config.write_text(text.replace("timeout: 5s", "timeout: ${VENDOR_KEY}", 1))
        refused = daemon.post("/-/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert refused.status_code == 400, refused.text
        responses.append(refused)
        wait_for(lambda: "timeout" in daemon.log, RUNS_S, "the refused reload to be logged")
        for response in responses:
            assert_no_secret(response.text, str(response.request.url))
            assert_no_secret(str(response.headers), str(response.request.url))
        assert_no_secret(daemon.log, "the daemon's log")
        assert "Traceback" not in daemon.log


# --- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def https_retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a retriever on 127.0.0.1 serving HTTPS with a self-signed certificate."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed; it is needed to make a self-signed certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    serving = ServerThread(_HitsHandler, tls=context)
    try:
        yield f"https://127.0.0.1:{serving.address[1]}/search"
    finally:
        serving.stop()


class _HitsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"hits": [{"id": "doc-1", "score": 0.9}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _search(config: TargetConfig, client: httpx.AsyncClient | None = None) -> Any:
    """One query through an HttpTarget (with the production client unless one is given)."""

    async def go() -> Any:
        async with client or make_client(config) as opened:
            return await HttpTarget(config.url, config, opened).search("q", 5)

    return asyncio.run(go())


def test_tls_is_verified_by_default_and_a_self_signed_certificate_fails(
    https_retriever: str,
) -> None:
    """A default target refuses a certificate nobody vouches for, and says why."""
    config = TargetConfig(url=https_retriever, body={"q": "{query}"}, retries=0)
    assert config.verify_tls is True
    answer = _search(config)
    assert answer.outcome == "connect_error"
    assert "CERTIFICATE_VERIFY_FAILED" in answer.error or "certificate" in answer.error.lower()


def test_verify_tls_false_accepts_the_self_signed_certificate(https_retriever: str) -> None:
    """Turning verification off for one target is what makes the same server answer."""
    config = TargetConfig(url=https_retriever, body={"q": "{query}"}, retries=0, verify_tls=False)
    answer = _search(config)
    assert answer.outcome == "ok", answer
    assert answer.ids == ("doc-1",)


# --- messages cut short must not cut a secret in half --------------------------------------------


@pytest.mark.parametrize("offset", range(0, 130, 4))
def test_a_quoted_value_cut_short_never_shows_part_of_the_credential(offset: int) -> None:
    """Error texts quote bodies and values only up to a length; the key may straddle that cut."""
    pad = "p" * offset

    def handler(request: httpx.Request) -> httpx.Response:
        key = request.headers["X-Api-Key"]
        if request.url.path == "/error":
            return httpx.Response(400, text=f"{pad}{key}")
        if request.url.path == "/text":
            return httpx.Response(200, text=f"{pad}{key}")
        hit = {"chunk": {"meta": {"parent_id": {"k": pad[:40] + key}}}, "relevance": pad + key}
        return httpx.Response(200, json={"data": {"matches": [hit]}})

    for path in ("/error", "/text", "/hits"):
        fields = target_entry(f"http://retriever.test{path}", retries=0)
        fields["headers"] = {"X-Api-Key": API_KEY}
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        answer = _search(TargetConfig(**fields), client)
        assert answer.error, answer
        assert_no_secret(answer.error, path)


def test_a_config_value_cut_short_never_shows_part_of_a_secret(tmp_path: Path) -> None:
    """A wrong-typed value quoted in a config problem is shortened after it is redacted."""
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    target = target_entry("http://127.0.0.1:9/search")
    target["concurrency"] = "x" * 50 + "${VENDOR_KEY}"
    config = {
        "targets": {"t": target},
        "suites": {"core": {"cases": "suite.yaml", "targets": ["t"]}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, ENV)
    [problem] = caught.value.problems
    assert problem.path == "targets.t.concurrency"
    assert_no_secret(str(problem), "the problem")
