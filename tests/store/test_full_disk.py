"""A full disk under a real `ragcanary serve`: /readyz says 503 and why, and no run is lost.

The disk is a real one: a tmpfs of a few MiB that the test mounts (as root, as CI runs) and
fills with a file until the kernel answers ENOSPC. SQLite keeps its database there; PostgreSQL
a tablespace, in which ragcanary's tables are created (``default_tablespace``), so only the
test's tables run out of space, never the server's own files or its write-ahead log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from factories import case_entry, run_report
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool

from ragcanary.measure.run_report import RunReport
from ragcanary.store.errors import StorageUnavailable
from ragcanary.store.storage import Store

API_KEY = "sk-full-disk-5e1"
QUERIES = [f"question {i:02d}" for i in range(6)]
RUNS_S = 40.0
SUITE = {"cases": "core.yaml", "targets": ["vendor"], "every": "1s", "k": [1, 5], "depth": 5}
READY_WITHIN_S = 2.0


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


@contextlib.contextmanager
def small_filesystem(directory: Path, size: str, **options: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``directory`` for the block (needs root)."""
    directory.mkdir()
    mount_options = ",".join([f"size={size}", *(f"{k}={v}" for k, v in options.items())])
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", mount_options, "tmpfs", str(directory)],
            check=True,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = f"cannot mount a small filesystem at {directory} ({exc}); run the tests as root"
        if os.environ.get("RAGCANARY_REQUIRE_MOUNT") == "1":
            pytest.fail(f"{reason} (RAGCANARY_REQUIRE_MOUNT=1 forbids skipping)")
        pytest.skip(reason)
    try:
        yield directory
    finally:
        subprocess.run(
            ["umount", "--lazy", str(directory)], check=False, capture_output=True, timeout=10
        )


@contextlib.contextmanager
def disk_filled(directory: Path) -> Iterator[Path]:
    """Fill the filesystem of ``directory`` until the kernel says ENOSPC; free it on the way out."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with pytest.raises(OSError, match="No space left on device"):
            _write_forever(fd)
    finally:
        os.close(fd)
    try:
        yield filler
    finally:
        filler.unlink(missing_ok=True)


def _write_forever(fd: int) -> None:
    block = b"\0" * 4096
    while True:
        os.write(fd, block)


def _daemon(directory: Path, storage: str, url: str) -> DaemonProcess:
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


def _stored(storage: str) -> set[str]:
    engine = sqlalchemy.create_engine(storage, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return set(conn.execute(sqlalchemy.text("SELECT run_id FROM runs")).scalars())
    finally:
        engine.dispose()


def _ready(daemon: DaemonProcess) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    response = daemon.get("/readyz")
    return response.status_code, response.json(), time.monotonic() - started


def _storage_warnings(daemon: DaemonProcess) -> list[dict[str, Any]]:
    return [e for e in daemon.events() if e.get("level") == "warning" and "storage" in e["event"]]


def _full_disk_is_not_ready_and_recovers(
    daemon: DaemonProcess, storage: str, disk: Path, full: str
) -> None:
    """Fill ``disk`` under a running ``daemon``; /readyz turns 503 naming ``full``, the
    storage warnings carry the error, and every run is stored once the disk has room again."""
    daemon.wait_runs("core", "vendor", 2, RUNS_S)
    wait_for(lambda: _ready(daemon)[0] == 200, RUNS_S, "/readyz to say 200")
    with disk_filled(disk):
        wait_for(
            lambda: daemon.scrape().number("ragcanary_storage_buffered_runs") >= 2,
            RUNS_S,
            "runs to wait in the buffer",
        )
        answers = [_ready(daemon) for _ in range(5)]
        assert all(took < READY_WITHIN_S for _, _, took in answers), answers
        assert [status for status, _, _ in answers] == [503] * 5, answers
        assert all(full in body["reason"] for _, body, _ in answers), answers
        warnings = _storage_warnings(daemon)
        assert warnings, daemon.log
        assert all(full in (w.get("error") or "") for w in warnings), warnings
        daemon.wait_runs("core", "vendor", 2, RUNS_S)  # the schedule goes on
    logged = {e["run_id"] for e in daemon.events() if e["event"] == "run"}
    wait_for(lambda: _ready(daemon)[0] == 200, RUNS_S, "/readyz to say 200 again")
    wait_for(lambda: logged <= _stored(storage), RUNS_S, "every run of the full disk stored")


def test_a_full_disk_under_sqlite_is_not_ready_and_says_why(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    with small_filesystem(tmp_path / "disk", "8m") as disk:
        storage = f"sqlite:///{disk / 'ragcanary.db'}"
        daemon = _daemon(tmp_path, storage, retriever.url)
        with running(daemon):
            _full_disk_is_not_ready_and_recovers(daemon, storage, disk, "disk is full")


@pytest.fixture
def postgres_on_small_disk(postgres_server: str) -> Iterator[tuple[str, Path]]:
    """A storage URL whose tables are created in a tablespace on a small tmpfs, and its mount.

    The server's own files and its write-ahead log stay where they are: only this test's tables
    run out of space. The tablespace and the schema are dropped after the test.
    """
    if sqlalchemy.make_url(postgres_server).host not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip(f"{postgres_server} is not on this machine: no tablespace on a local disk")
    owner = subprocess.run(["id", "-u", "postgres"], capture_output=True, text=True, check=False)
    if owner.returncode != 0:
        pytest.skip("no postgres user on this machine to own the tablespace's directory")
    name = f"test_{uuid.uuid4().hex[:16]}"
    admin = sqlalchemy.create_engine(
        postgres_server, poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    # Outside pytest's tmp_path, whose parents only root may enter: the server must reach it.
    base = Path(tempfile.mkdtemp(prefix="ragcanary-pgdisk-"))
    try:
        base.chmod(0o755)
        with small_filesystem(base / "disk", "8m", uid=owner.stdout.strip(), mode="0700") as disk:
            with admin.connect() as conn:
                conn.execute(sqlalchemy.text(f"CREATE TABLESPACE \"{name}\" LOCATION '{disk}'"))
            try:
                with admin.connect() as conn:
                    conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{name}"'))
                url = sqlalchemy.make_url(postgres_server).update_query_dict(
                    {"options": f"-csearch_path={name} -cdefault_tablespace={name}"}
                )
                yield url.render_as_string(hide_password=False), disk
            finally:
                with admin.connect() as conn:
                    conn.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
                    conn.execute(sqlalchemy.text(f'DROP TABLESPACE "{name}"'))
    finally:
        admin.dispose()
        shutil.rmtree(base, ignore_errors=True)


def test_a_full_disk_under_postgres_is_not_ready_and_says_why(
    tmp_path: Path, retriever: FakeRetriever, postgres_on_small_disk: tuple[str, Path]
) -> None:
    storage, disk = postgres_on_small_disk
    daemon = _daemon(tmp_path, storage, retriever.url)
    with running(daemon):
        _full_disk_is_not_ready_and_recovers(daemon, storage, disk, "No space left on device")


def _report(run_id: str) -> RunReport:
    return run_report(
        run_id,
        target="vendor",
        metrics={"mrr": 1.0},
        cases=[case_entry(f"case-{i}", ids=["a"] * 5, scores=[0.5] * 5) for i in range(6)],
    )


def test_the_write_check_fails_on_a_full_sqlite_disk_as_a_run_does(tmp_path: Path) -> None:
    with (
        small_filesystem(tmp_path / "disk", "2m") as disk,
        Store.from_url(f"sqlite:///{disk / 'ragcanary.db'}") as store,
    ):
        store.migrate()
        store.save_run(_report("before"))
        store.check_write()
        with disk_filled(disk):
            with pytest.raises(StorageUnavailable, match="disk is full"):
                store.save_run(_report("during"))
            with pytest.raises(StorageUnavailable, match="disk is full"):
                store.check_write()
        store.check_write()
        store.save_run(_report("after"))


def test_the_write_check_leaves_no_row_behind(store: Store) -> None:
    store.save_run(_report("kept"))
    for _ in range(200):
        store.check_write()
    with store.reading() as conn:
        stored = list(conn.execute(sqlalchemy.text("SELECT run_id FROM runs")).scalars())
    assert stored == ["kept"]
    assert [r["run_id"] for r in store.list_runs()] == ["kept"]


def test_the_write_check_does_not_grow_a_sqlite_database(sqlite_url: str) -> None:
    def pages(store: Store) -> int:
        with store.reading() as conn:
            return int(conn.execute(sqlalchemy.text("PRAGMA page_count")).scalar_one())

    with Store.from_url(sqlite_url) as store:
        store.migrate()
        store.check_write()
        before = pages(store)
        for _ in range(500):
            store.check_write()
        assert pages(store) == before
