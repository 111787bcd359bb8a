"""A full disk under storage: the write check fails as a run's write does.

The disk is a real one: a tmpfs of a few MiB that the test mounts (as root, as CI runs) and
fills with a file until the kernel answers ENOSPC. SQLite keeps its database there; PostgreSQL
a tablespace, in which ragcanary's tables are created (``default_tablespace``), so only the
test's tables run out of space, never the server's own files or its write-ahead log.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from retrievers import FakeRetriever, graded_corpus

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


def _report(run_id: str) -> dict[str, Any]:
    return {
        "suite": "core",
        "target": "vendor",
        "run_id": run_id,
        "started_at": "2026-11-22T12:00:00+00:00",
        "duration_s": 0.5,
        "outcome": "ok",
        "coverage": 1.0,
        "metrics": {"mrr": 1.0},
        "cases": [{"id": f"case-{i}", "ids": ["a"] * 5, "scores": [0.5] * 5} for i in range(6)],
    }


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
