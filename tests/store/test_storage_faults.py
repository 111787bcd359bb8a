"""Storage faults against a real `ragcanary serve`: nothing stops the schedule, no run is lost.

A SQLite file made read-only (immutable, so that even root cannot write it), a PostgreSQL whose
packets are dropped (iptables), SIGTERM while storage refuses writes, and a second daemon on the
same SQLite file. Several daemons on one PostgreSQL are replicas: tests/serve/test_replicas_e2e.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy
import yaml
from daemon_harness import (
    DaemonProcess,
    TcpProxy,
    free_port,
    packets_dropped,
    running,
    wait_for,
)
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool

API_KEY = "sk-storage-faults-2b7"
QUERIES = [f"question {i:02d}" for i in range(6)]
RUNS_S = 40.0
SUITE = {"cases": "core.yaml", "targets": ["vendor"], "every": "1s", "k": [1, 5], "depth": 5}
CORE = {"suite": "core", "target": "vendor"}


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _daemon(directory: Path, storage: str, url: str) -> DaemonProcess:
    directory.mkdir(parents=True, exist_ok=True)
    cases = [
        {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(url, timeout="5s", retries=0)},
        "suites": {"core": SUITE},
    }
    (directory / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return DaemonProcess(directory / "ragcanary.yaml", port, {"VENDOR_KEY": API_KEY})


@contextlib.contextmanager
def immutable(database: Path) -> Iterator[None]:
    """The SQLite database cannot be written, not even by root (``chattr +i``), in the block.

    Its write-ahead log too: a connection already open writes there, not to the database
    file. Not the shared-memory index: SQLite maps it, and writing a mapped page of an
    immutable file kills the process (SIGBUS) before any error could be handled.
    """
    wal = database.with_name(database.name + "-wal")
    files = [p for p in (database, wal) if p.exists()]
    try:
        for path in files:
            subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot make {database} immutable with chattr: {exc}")
    try:
        yield
    finally:
        for path in files:
            subprocess.run(
                ["chattr", "-i", str(path)], check=False, capture_output=True, timeout=10
            )


def _environment(daemon: DaemonProcess) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
    return {**inherited, **daemon.env}


def _logged_runs(daemon: DaemonProcess) -> list[str]:
    return [e["run_id"] for e in daemon.events() if e["event"] == "run"]


def _stored_sqlite(database: Path) -> set[str]:
    engine = sqlalchemy.create_engine(f"sqlite:///{database}", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return set(conn.execute(sqlalchemy.text("SELECT run_id FROM runs")).scalars())
    finally:
        engine.dispose()


def _ready_status(daemon: DaemonProcess) -> tuple[int, float]:
    started = time.monotonic()
    response = daemon.get("/readyz")
    return response.status_code, time.monotonic() - started


def test_read_only_sqlite_is_not_ready_and_recovers_when_writable(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    database = tmp_path / "ragcanary.db"
    daemon = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with running(daemon):  # creates the schema, then stops: a database that exists
        daemon.wait_runs("core", "vendor", 1, RUNS_S)
    before = _stored_sqlite(database)
    daemon = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with immutable(database), running(daemon):
        wait_for(lambda: _ready_status(daemon)[0] == 503, RUNS_S, "/readyz to say 503")
        scrape = daemon.wait_runs("core", "vendor", 3, RUNS_S)  # the schedule goes on
        assert scrape.number("ragcanary_storage_buffered_runs") >= 1
        assert scrape.total("ragcanary_storage_errors_total") >= 1
        assert _stored_sqlite(database) == before
    # (running() stopped it while the file was immutable: its runs went to the spool.)
    spooled = set(_logged_runs(daemon))
    daemon = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with running(daemon):
        wait_for(lambda: _ready_status(daemon)[0] == 200, RUNS_S, "/readyz to say 200")
        wait_for(lambda: spooled <= _stored_sqlite(database), RUNS_S, "spooled runs stored")
        wait_for(
            lambda: daemon.scrape().number("ragcanary_storage_buffered_runs") == 0,
            RUNS_S,
            "the buffer to drain",
        )
    assert not (tmp_path / "ragcanary.db.spool.jsonl").exists()


def test_storage_that_becomes_writable_gets_the_buffered_runs_without_a_restart(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    database = tmp_path / "ragcanary.db"
    daemon = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with running(daemon):
        daemon.wait_runs("core", "vendor", 1, RUNS_S)
        with immutable(database):
            wait_for(lambda: _ready_status(daemon)[0] == 503, RUNS_S, "/readyz to say 503")
            daemon.wait_runs("core", "vendor", 2, RUNS_S)
        buffered = set(_logged_runs(daemon))
        wait_for(lambda: _ready_status(daemon)[0] == 200, RUNS_S, "/readyz to say 200")
        wait_for(lambda: buffered <= _stored_sqlite(database), RUNS_S, "buffered runs stored")


def test_sigterm_while_storage_refuses_writes_loses_no_run(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    database = tmp_path / "ragcanary.db"
    first = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with running(first):
        first.wait_runs("core", "vendor", 1, RUNS_S)
        with immutable(database):
            wait_for(lambda: _ready_status(first)[0] == 503, RUNS_S, "/readyz to say 503")
            first.wait_runs("core", "vendor", 4, RUNS_S)
            code, took = first.stop(timeout=40)
    assert code == 0
    assert took < 30
    logged = set(_logged_runs(first))
    spool = tmp_path / "ragcanary.db.spool.jsonl"
    assert spool.exists()
    spooled = {json.loads(line)["run_id"] for line in spool.read_text().splitlines()}
    assert spooled  # the runs of the outage, waiting for the next start
    second = _daemon(tmp_path, f"sqlite:///{database}", retriever.url)
    with running(second):
        wait_for(lambda: logged <= _stored_sqlite(database), RUNS_S, "every logged run stored")
    assert not spool.exists()


def _assert_refused(second: DaemonProcess, holder: DaemonProcess) -> None:
    """``second`` exits 2 at once, naming the pid of ``holder``, the daemon on its storage."""
    done = subprocess.run(
        [sys.executable, "-m", "ragcanary", "serve", "-c", str(second.config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_environment(second),
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"in use by another ragcanary serve (pid {holder.process.pid})" in done.stderr


def test_second_daemon_on_one_sqlite_file_exits_2_naming_the_first(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    first = _daemon(tmp_path / "a", storage, retriever.url)
    with running(first):
        second = _daemon(tmp_path / "b", storage, retriever.url)
        _assert_refused(second, holder=first)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{second.port}/healthz", timeout=2)
        assert first.get("/healthz").status_code == 200


@pytest.mark.slow
def test_partitioned_postgres_never_stops_the_schedule_and_loses_no_run(
    tmp_path: Path, retriever: FakeRetriever, postgres_url: str
) -> None:
    direct = sqlalchemy.make_url(postgres_url)
    with TcpProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy:
        storage = direct.set(port=proxy.port).render_as_string(hide_password=False)
        daemon = _daemon(tmp_path, storage, retriever.url)
        with running(daemon):
            daemon.wait_runs("core", "vendor", 2, RUNS_S)
            with packets_dropped(proxy.port):
                # The schedule goes on: runs are counted while storage hangs.
                daemon.wait_runs("core", "vendor", 5, RUNS_S)
                statuses = [_ready_status(daemon) for _ in range(3)]
                assert all(took <= 2.0 for _, took in statuses), statuses
                assert statuses[-1][0] == 503
                code, took = daemon.stop(timeout=60)
        assert code == 0
        assert took <= 30, f"SIGTERM took {took:.1f}s with storage partitioned"
        logged = set(_logged_runs(daemon))
        restarted = _daemon(tmp_path, storage, retriever.url).start()
        try:

            def stored() -> set[str]:
                runs: list[dict[str, Any]] = restarted.get("/api/v1/runs", limit=1000).json()[
                    "runs"
                ]
                return {r["run_id"] for r in runs}

            wait_for(lambda: logged <= stored(), RUNS_S, "every run of the partition stored")
        finally:
            if restarted.process.poll() is None:
                restarted.stop()
            restarted.kill()
