"""The demo names the documents that left its index: the demo retriever as a process of its own,
the config `ragcanary demo` writes (with its `lookup:`), and `ragcanary run` as CI runs it.

A healthy run is written with ``--report``; the retriever then drops the smallest shards of its
index (mode ``drop-docs``, JSON's documents among them) and the next run, judged against the
healthy one, must fail naming ``index_lost`` and the judged documents that left.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from run_report_process import Ran, run_with_report
from server_process import ServerProcess, free_port

from ragcanary.cli.serving import write_demo_config
from ragcanary.demo.retriever import is_dropped

pytestmark = pytest.mark.e2e

# Drops the shards of sys and json only: four JSON canaries lose their judged answers.
FRACTION = 0.01
RUN_TIMEOUT_S = 120


@pytest.fixture
def retriever(tmp_path: Path) -> Iterator[str]:
    """`python -m ragcanary.demo` on a free port of 127.0.0.1; its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = ServerProcess(
        [sys.executable, "-m", "ragcanary.demo", "--port", str(port)],
        f"{url}/healthz",
        tmp_path / "retriever.log",
    )
    try:
        process.wait_ready(within_s=60)
        yield url
    finally:
        process.stop()


def _run(config: Path, report: str, *extra: str) -> Ran:
    return run_with_report(config, report, *extra, timeout=RUN_TIMEOUT_S)


def test_dropped_judged_documents_are_named_lost_from_the_demo_index(
    retriever: str, tmp_path: Path
) -> None:
    port = int(retriever.rsplit(":", 1)[1])
    config = write_demo_config(tmp_path / "demo", port, "127.0.0.1:9464", "5s")
    ran = _run(config, "healthy.json")
    assert ran.code == 0, ran.output
    healthy = ran.report
    assert healthy["diagnosis"]["cause"] == "none"

    switched = httpx.post(
        f"{retriever}/mode", json={"mode": "drop-docs", "fraction": FRACTION}, timeout=5
    )
    assert switched.status_code == 200
    ran = _run(config, "now.json", "--baseline", "healthy.json")
    now = ran.report

    assert ran.code == 1, ran.output
    assert now["outcome"] == "regression"
    diagnosis = now["diagnosis"]
    assert diagnosis["cause"] == "index_lost", diagnosis
    assert diagnosis["checked"]["index_lookup"] is True
    [lost] = diagnosis["causes"]
    assert lost["cause"] == "index_lost"
    assert "json.dumps" in lost["ids"]
    assert all(is_dropped(doc, FRACTION) for doc in lost["ids"]), lost["ids"]
    per_case = {
        case["id"]: case["vs_baseline"]["lost"] for case in now["cases"] if case["vs_baseline"]
    }
    named = {entry["id"] for losses in per_case.values() for entry in losses}
    assert named == set(lost["ids"])
    assert {entry["why"] for losses in per_case.values() for entry in losses} == {"not_in_index"}
    assert sorted(c for c, losses in per_case.items() if losses) == sorted(lost["cases"])
    assert "json-dumps" in lost["cases"]
    assert diagnosis["summary"].startswith(f"{len(lost['ids'])} judged documents left the index:")
    line = ran.line_after_verdict()
    assert line.startswith("cause index_lost: "), ran.output
    assert "json.dumps" in line
