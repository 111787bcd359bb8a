"""`ragcanary compare --url`: the newest runs a running daemon stored, compared without asking."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, config_yaml, free_port, running
from retrievers import FakeRetriever, ServerThread, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-compare-url-41"
QUERIES = [f"question {i:02d}" for i in range(20)]
CASES = [
    {"id": f"case-{i:02d}", "query": q, "relevant": [f"rel-{i}"], "tags": ["all"]}
    for i, q in enumerate(QUERIES)
]


def _config(directory: Path, urls: dict[str, str], port: int) -> Path:
    (directory / "core.yaml").write_text(json.dumps({"cases": CASES}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "targets": {name: target_entry(url) for name, url in urls.items()},
        "suites": {"core": {"cases": "core.yaml", "targets": list(urls), "every": "2s"}},
    }
    path = directory / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, Path]]:
    directory = tmp_path_factory.mktemp("compare-url")
    corpus = graded_corpus(QUERIES)
    with (
        FakeRetriever(corpus=corpus, api_key=API_KEY) as ref,
        FakeRetriever(corpus=corpus, api_key=API_KEY) as equal,
        FakeRetriever(corpus=corpus, api_key=API_KEY) as much,
    ):
        much.drop_ids = {f"rel-{i}" for i in range(12)}
        port = free_port()
        urls = {"ref": ref.url, "equal": equal.url, "much": much.url}
        path = _config(directory, urls, port)
        with running(DaemonProcess(path, port, {"VENDOR_KEY": API_KEY})) as started:
            for name in urls:
                started.wait_runs("core", name, 1, 30)
            yield started, path


def _cli(*args: str) -> Any:
    # The config gives the suite's cases; no VENDOR_KEY: no target is asked.
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_compare_reads_the_daemon_s_newest_runs(
    daemon: tuple[DaemonProcess, Path], tmp_path: Path
) -> None:
    started, config = daemon
    out = tmp_path / "comparison.json"
    args = ("--suite", "core", "ref", "equal", "much", "--url", started.url, "--report", str(out))
    result = _cli("compare", "-c", str(config), *args)
    assert result.exit_code == 1, result.output
    assert "much is significantly worse than ref" in result.output
    data = json.loads(out.read_text())
    assert data["targets"]["equal"]["significant"] == []
    assert data["targets"]["much"]["worse"] is True
    for name, shown in data["targets"].items():
        stored = started.get(f"/api/v1/runs/{shown['run_id']}").json()
        assert stored["target"] == name
        for metric, value in stored["metrics"].items():
            assert shown["metrics"][metric] == pytest.approx(value, abs=1e-12)


def _old_daemon() -> ServerThread:
    """A daemon's API whose only run of every pair started two hours ago."""
    started = (datetime.now(UTC) - timedelta(hours=2)).isoformat()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            row = {"run_id": "0123456789ab", "suite": "core", "started_at": started}
            body = json.dumps({"runs": [row]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return ServerThread(Handler)


def test_a_stored_run_older_than_max_age_is_exit_3_naming_the_pair(tmp_path: Path) -> None:
    config = _config(tmp_path, {"ref": "http://127.0.0.1:9/q", "other": "http://127.0.0.1:9/q"}, 1)
    server = _old_daemon()
    try:
        host, port = server.address
        args = ("--suite", "core", "ref", "other", "--url", f"http://{host}:{port}")
        result = _cli("compare", "-c", str(config), *args, "--max-age", "30m")
    finally:
        server.stop()
    assert result.exit_code == 3, result.output
    assert "suite core on target ref" in result.output
    assert "started 2h00m ago, more than --max-age 30m" in result.output
