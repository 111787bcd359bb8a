"""Secrets and what a target returns, end to end: real retrievers on 127.0.0.1, real commands.

A secret a target echoes escaped (``\\/``, ``\\uXXXX``) is masked like the plain one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from daemon_harness import config_yaml
from retrievers import ServerThread, target_entry

# Base64 API keys hold "/" and "+": PHP's json_encode echoes them as "\/".
SLASHED_KEY = "sk/live+Zm9v/Yg3Tq=="

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
