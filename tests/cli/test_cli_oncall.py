"""On-call commands against a running daemon (`--url`): no config, database or secret needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from daemon_harness import DaemonProcess, config_yaml, free_port, running
from retrievers import FakeRetriever, ServerThread, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-oncall-url-8e1"
QUERIES = [f"question {i:02d}" for i in range(4)]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp("oncall-url")
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        cases = [
            {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
        ]
        (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
        port = free_port()
        entry = target_entry(retriever.url)
        config = {
            "storage": f"sqlite:///{directory / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{port}",
            "targets": {"vendor": entry, "other": entry},
            "suites": {
                "core": {"cases": "core.yaml", "targets": ["vendor", "other"], "every": "1s"}
            },
        }
        (directory / "ragcanary.yaml").write_text(config_yaml(config), encoding="utf-8")
        env = {"VENDOR_KEY": API_KEY}
        with running(DaemonProcess(directory / "ragcanary.yaml", port, env)) as started:
            started.wait_runs("core", "vendor", 2, 30)
            started.wait_runs("core", "other", 1, 30)
            yield started


def _cli(*args: str) -> object:
    # No config file, no VENDOR_KEY, no database: only the daemon's address.
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})


@pytest.mark.parametrize(
    "args",
    [
        ("diff", "--suite", "core", "--target", "vendor"),
        ("history", "--suite", "core", "--case", "case-0"),
        ("runs", "--suite", "core"),
        ("baseline", "show"),
    ],
)
def test_read_commands_work_against_the_daemon_with_no_config_or_secret(
    daemon: DaemonProcess, args: tuple[str, ...]
) -> None:
    result = _cli(*args, "--url", daemon.url)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    output = result.output  # type: ignore[attr-defined]
    assert API_KEY not in output
    # At 80 columns too, no run id is folded over lines: each one shown is shown whole.
    stored = daemon.get("/api/v1/runs", suite="core", limit=1000).json()["runs"]
    ids = {run["run_id"] for run in stored}
    assert any(run_id in output for run_id in ids), output
    assert all(run_id in output for run_id in ids if run_id[:8] in output), output


def test_runs_lists_ids_that_diff_takes(daemon: DaemonProcess) -> None:
    listed = _cli("runs", "--suite", "core", "--target", "vendor", "--json", "--url", daemon.url)
    rows = json.loads(listed.output)  # type: ignore[attr-defined]
    assert rows
    assert {r["target"] for r in rows} == {"vendor"}
    newest, oldest = rows[0]["run_id"], rows[-1]["run_id"]
    args = ("diff", "--suite", "core", "--target", "vendor", "--from", oldest, "--to", newest)
    result = _cli(*args, "--url", daemon.url)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert newest in result.output  # type: ignore[attr-defined]


def test_a_run_of_another_target_is_refused_by_the_api_and_the_cli(daemon: DaemonProcess) -> None:
    other = daemon.get("/api/v1/runs", suite="core", target="other").json()["runs"][0]["run_id"]
    answer = daemon.get("/api/v1/diff", suite="core", target="vendor", **{"from": other})
    assert answer.status_code == 400
    assert "target 'other'" in answer.json()["detail"]
    args = ("diff", "--suite", "core", "--target", "vendor", "--from", other)
    result = _cli(*args, "--url", daemon.url)
    assert result.exit_code == 2
    assert "target 'other'" in result.stderr  # type: ignore[attr-defined]


def test_api_runs_filter_by_outcome_and_since(daemon: DaemonProcess) -> None:
    assert daemon.get("/api/v1/runs", outcome="unavailable").json()["runs"] == []
    assert daemon.get("/api/v1/runs", outcome="ok", since="1h").json()["runs"]
    assert daemon.get("/api/v1/runs", since="999999d").status_code == 400


def test_an_unreachable_daemon_is_exit_2_with_what_to_check(tmp_path: Path) -> None:
    result = _cli("runs", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 2
    assert "cannot reach the daemon" in result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "body",
    [b"<html>not a daemon</html>", b"[" * 100_000 + b"]" * 100_000],
    ids=["html", "nested-too-deep"],
)
def test_an_answer_that_is_not_readable_json_is_exit_2_asking_if_it_is_a_daemon(
    body: bytes,
) -> None:
    """Issue 34 item 9: JSON nested deeper than the decoder follows is no traceback either."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ServerThread(Handler)
    try:
        host, port = server.address
        result = _cli("runs", "--url", f"http://{host}:{port}")
    finally:
        server.stop()
    assert result.exit_code == 2, result.output
    assert "without JSON; is this a ragcanary daemon?" in result.stderr  # type: ignore[attr-defined]
