"""Secrets and what a target returns, end to end: real retrievers on 127.0.0.1, real commands.

Two promises: an id a target returns is its data and is stored as returned, even when it
holds a secret's characters (one that *is* a secret is refused); a secret a target echoes
escaped (``\\/``, ``\\uXXXX``) is masked like the plain one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, config_yaml, free_port, running
from retrievers import FakeRetriever, ServerThread, target_entry

API_KEY = "sk-e2e-41c9a7d2"
TENANT = "acme"
# Base64 API keys hold "/" and "+": PHP's json_encode echoes them as "\/".
SLASHED_KEY = "sk/live+Zm9v/Yg3Tq=="
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
