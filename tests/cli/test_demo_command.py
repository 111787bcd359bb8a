"""`ragcanary demo` as a newcomer uses it: start it, break the retriever, see drift appear."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from ragcanary.cli.app import app

DEADLINE_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(what: str, check: Callable[[], bool], deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _gauge(metrics_url: str, name: str) -> float | None:
    try:
        text = httpx.get(metrics_url, timeout=2).text
    except httpx.HTTPError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    listen = f"127.0.0.1:{_free_port()}"
    workdir = tmp_path / "demo"
    output = tmp_path / "demo.log"
    with output.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragcanary",
                "demo",
                "--port",
                "0",
                "--listen",
                listen,
                "--every",
                "1s",
                "--workdir",
                str(workdir),
                "--for",
                "90s",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "200"},
        )
    try:
        yield output, listen, workdir
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_drift_appears_in_metrics_and_diff_after_switching_the_retriever(
    demo: tuple[Path, str, Path],
) -> None:
    output, listen, workdir = demo
    _wait_for("the retriever's address", lambda: "demo retriever:" in output.read_text())
    retriever = re.search(r"demo retriever: (http://127\.0\.0\.1:\d+)", output.read_text())
    assert retriever, output.read_text()
    # The web pages' address comes first: it is what a newcomer opens.
    first = output.read_text().splitlines()[0]
    assert first == f"open http://{listen}/ui/ in a browser: what regressed, and why"
    metrics = f"http://{listen}/metrics"
    suite = 'suite="demo",target="demo-bm25"'
    _wait_for("two healthy runs", lambda: (_gauge(metrics, "ragcanary_rank_overlap") or 0) == 1.0)
    assert _gauge(metrics, "ragcanary_regression") == 0.0

    switched = httpx.post(f"{retriever.group(1)}/mode", json={"mode": "drop-docs"}, timeout=5)
    assert switched.status_code == 200
    _wait_for("the regression", lambda: _gauge(metrics, "ragcanary_regression") == 1.0)
    text = httpx.get(metrics, timeout=2).text
    assert f'ragcanary_baseline_delta{{metric="hit_rate@5",{suite}}} -' in text
    fleet = httpx.get(f"http://{listen}/ui/", timeout=5)
    assert fleet.status_code == 200
    assert 'data-status="regression"' in fleet.text

    result = CliRunner().invoke(
        app,
        ["diff", "-c", str(workdir / "ragcanary.yaml"), "--suite", "demo", "--target", "demo-bm25"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "left the top-k" in result.output
    assert "hit_rate@5" in result.output
    # The demo config's lookup: asks the retriever's GET /docs/{id}: the cause is named.
    assert "cause index_lost: " in result.output
    assert "judged documents left the index: " in result.output


@pytest.mark.e2e  # the demo serves its retriever on 127.0.0.1 and probes it
def test_once_in_a_degraded_mode_gates_like_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["demo", "--once", "--drift", "drop-docs", "--port", "0", "--workdir", str(tmp_path)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 1, result.output
    assert "REGRESSION" in result.output
    assert "below the floor" in result.output


def test_unknown_drift_mode_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--drift", "meltdown", "--workdir", str(tmp_path)])
    assert result.exit_code == 2
    assert "drop-docs" in result.output
