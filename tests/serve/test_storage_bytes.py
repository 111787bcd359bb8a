"""``ragcanary_storage_bytes``: the daemon exports the bytes its SQLite database and WAL take,
measured in the background and after each prune, and keeps the last size through an outage."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from daemon_harness import free_port
from prometheus_client import generate_latest

from ragcanary.serve.background import measure_storage
from ragcanary.serve.daemon import Daemon, JobKey
from ragcanary.serve.metrics.config_export import suite_pairs
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

CONFIG = """\
storage: sqlite:///{db}
listen: 127.0.0.1:{port}
targets:
  search: {{url: "http://search.test/q", body: {{query: "{{query}}", k: "{{k}}"}}}}
suites:
  core: {{cases: core.json, targets: [search], every: 1h, k: [1], depth: 2}}
"""
CASES = [{"id": f"c{i}", "query": f"question {i}", "relevant": [f"d{i}"]} for i in range(5)]
KEY = JobKey("core", "search")
DEADLINE_S = 10.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _search() -> httpx.MockTransport:
    """A retriever that returns the case's relevant document first."""

    def answer(request: httpx.Request) -> httpx.Response:
        i = json.loads(request.content)["query"].split()[-1]
        return httpx.Response(200, json={"hits": [{"id": f"d{i}", "score": 0.9}]})

    return httpx.MockTransport(answer)


def make_daemon(directory: Path, port: int = 9, storage_size_s: float = 60.0) -> Daemon:
    (directory / "core.json").write_text(json.dumps({"cases": CASES}), encoding="utf-8")
    path = directory / "ragcanary.yaml"
    path.write_text(CONFIG.format(db=directory / "ragcanary.db", port=port), encoding="utf-8")
    loaded = load_config(path, {})
    return Daemon(
        path,
        {},
        loaded,
        client_factory=lambda _config: httpx.AsyncClient(transport=_search()),
        storage_size_s=storage_size_s,
    )


def file_bytes(directory: Path) -> int:
    """The database file and its WAL, as the file system has them."""
    wal = directory / "ragcanary.db-wal"
    return (directory / "ragcanary.db").stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def remove_database(directory: Path) -> None:
    for file in directory.glob("ragcanary.db*"):
        file.unlink()


def storage_bytes(exporter: Exporter) -> float | None:
    return exporter.registry.get_sample_value("ragcanary_storage_bytes")


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    """A daemon, never started, whose pair is laid out and whose tables exist."""
    daemon = make_daemon(tmp_path)
    daemon.exporter.load(suite_pairs(daemon.loaded))
    daemon.store.migrate()
    yield daemon
    await daemon.shutdown()


def test_the_gauge_is_absent_until_the_store_is_measured() -> None:
    """Never a 0 that reads as an empty store: the series appears with the first size."""
    exporter = Exporter()
    assert b"ragcanary_storage_bytes" not in generate_latest(exporter.registry)
    exporter.set_storage_bytes(123_456)
    assert storage_bytes(exporter) == 123_456
    exporter.set_storage_bytes(654_321)
    assert storage_bytes(exporter) == 654_321
    assert b"ragcanary_storage_bytes 654321.0" in exporter.exposition()


async def test_after_a_run_and_the_prune_the_gauge_is_the_database_and_its_wal(
    daemon: Daemon, tmp_path: Path
) -> None:
    await daemon.run_now(KEY)
    assert storage_bytes(daemon.exporter) is None  # a run alone measures nothing
    await daemon.prune()
    measured = storage_bytes(daemon.exporter)
    assert measured == file_bytes(tmp_path) > 0
    await daemon.run_now(KEY)
    await daemon.prune()
    assert storage_bytes(daemon.exporter) == file_bytes(tmp_path)


async def test_while_storage_is_down_the_gauge_keeps_its_last_size(
    daemon: Daemon, tmp_path: Path
) -> None:
    await daemon.run_now(KEY)
    await measure_storage(daemon.keeper, daemon.exporter)
    last = storage_bytes(daemon.exporter)
    assert last == file_bytes(tmp_path)
    remove_database(tmp_path)  # gone from under the daemon
    await measure_storage(daemon.keeper, daemon.exporter)
    assert storage_bytes(daemon.exporter) == last
    assert daemon.keeper.down
    errors = daemon.exporter.registry.get_sample_value(
        "ragcanary_storage_errors_total", {"operation": "read"}
    )
    assert errors == 1
    await measure_storage(daemon.keeper, daemon.exporter)  # down: not even asked
    assert storage_bytes(daemon.exporter) == last


async def test_a_started_daemon_measures_the_store_again_after_a_run(tmp_path: Path) -> None:
    """Started, the daemon measures in the background (every 50 ms here, every minute by
    default): after a run the gauge comes to the files' size, with no prune."""
    daemon = make_daemon(tmp_path, port=free_port(), storage_size_s=0.05)
    try:
        await daemon.startup()
        await daemon.run_now(KEY)
        deadline = time.monotonic() + DEADLINE_S
        while storage_bytes(daemon.exporter) != file_bytes(tmp_path):
            assert time.monotonic() < deadline, (
                storage_bytes(daemon.exporter),
                file_bytes(tmp_path),
            )
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(timeout=5) as client:  # the server runs on this loop
            scraped = (await client.get(f"http://{daemon.loaded.config.listen}/metrics")).text
        assert f"ragcanary_storage_bytes {float(file_bytes(tmp_path))}" in scraped
    finally:
        await daemon.shutdown()
