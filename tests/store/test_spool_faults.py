"""A damaged or planted spool under a real `ragcanary serve`: it starts, and loses nothing.

The spool is the file a daemon leaves at SIGTERM with the runs storage did not take
(store/spool.py). What the next start cannot read (a line cut inside a character, a line nested
too deep to decode, a directory where the file should be, a symbolic link) is skipped, logged
once, counted in ``ragcanary_storage_errors_total{operation="spool"}`` and kept aside as
``.bad``; the readable runs are stored. Writing the spool follows no link planted beside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool
from test_storage import NOW, make_report
from test_storage_faults import immutable

from ragcanary.measure.report_json import marshal

API_KEY = "sk-spool-faults-9d4"
QUERIES = [f"question {i:02d}" for i in range(4)]
STORED_S = 40.0
SPOOL = "ragcanary.db.spool.jsonl"
GOOD = ["spooled-1", "spooled-2", "spooled-3"]


def _daemon(directory: Path, url: str, every: str = "1h") -> DaemonProcess:
    cases = [
        {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(url, timeout="5s", retries=0)},
        "suites": {"core": {"cases": "core.yaml", "targets": ["vendor"], "every": every}},
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


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _line(run_id: str) -> bytes:
    report = make_report(run_id, NOW, target="vendor", case_ids=("case-0", "café-1"))
    return json.dumps(marshal(report), ensure_ascii=False).encode() + b"\n"


def _cut_inside_a_character(spool: Path) -> bytes:
    """The file ends inside the two bytes of an "é" (a copy cut short, a disk that filled)."""
    whole = _line("spooled-cut")
    cut = whole[: whole.index("é".encode()) + 1]
    spool.write_bytes(b"".join(_line(r) for r in GOOD) + cut)
    return cut


def _nested_too_deep(spool: Path) -> bytes:
    """A line of arrays nested far deeper than any report, between readable ones."""
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    spool.write_bytes(_line(GOOD[0]) + deep + _line(GOOD[1]) + _line(GOOD[2]))
    return deep


CORRUPT_LINES: dict[str, Callable[[Path], bytes]] = {
    "cut inside a character": _cut_inside_a_character,
    "nested too deep": _nested_too_deep,
}


def _spool_errors(daemon: DaemonProcess) -> float:
    return daemon.scrape().number("ragcanary_storage_errors_total", operation="spool")


def _skipped(daemon: DaemonProcess) -> list[dict[str, Any]]:
    return [e for e in daemon.events() if e["event"].startswith("spool")]


@pytest.mark.parametrize("corrupt", CORRUPT_LINES.values(), ids=CORRUPT_LINES.keys())
def test_an_unreadable_spool_line_is_kept_aside_and_the_others_are_stored(
    tmp_path: Path, retriever: FakeRetriever, corrupt: Callable[[Path], bytes]
) -> None:
    bad = corrupt(tmp_path / SPOOL)
    daemon = _daemon(tmp_path, retriever.url)
    with running(daemon):
        storage = f"sqlite:///{tmp_path / 'ragcanary.db'}"
        wait_for(lambda: set(GOOD) <= _stored(storage), STORED_S, "the readable runs stored")
        assert _spool_errors(daemon) == 1
        skipped = _skipped(daemon)
        assert len(skipped) == 1, skipped
        assert skipped[0]["level"] == "error"
        assert skipped[0]["line"] == (4 if bad.startswith(b"{") else 2)
        assert skipped[0]["reason"]
        kept = tmp_path / skipped[0]["kept_at"]
        wait_for(lambda: not (tmp_path / SPOOL).exists(), STORED_S, "the spool to be removed")
    assert kept.name.endswith(".bad")
    assert bad.rstrip(b"\n") in kept.read_bytes()
    assert "spooled-cut" not in _stored(storage)


def test_a_directory_where_the_spool_should_be_is_moved_aside(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    (tmp_path / SPOOL).mkdir()
    (tmp_path / SPOOL / "notes.txt").write_text("someone's notes", encoding="utf-8")
    daemon = _daemon(tmp_path, retriever.url)
    with running(daemon):
        assert _spool_errors(daemon) == 1
        skipped = _skipped(daemon)
        assert len(skipped) == 1, skipped
        assert "directory" in skipped[0]["reason"]
        kept = tmp_path / skipped[0]["kept_at"]
        assert daemon.get("/readyz").status_code == 200
    assert (kept / "notes.txt").read_text(encoding="utf-8") == "someone's notes"
    assert not (tmp_path / SPOOL).exists()


def test_a_spool_that_is_a_symbolic_link_is_not_followed(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(b"".join(_line(r) for r in GOOD))
    (tmp_path / SPOOL).symlink_to(elsewhere)
    daemon = _daemon(tmp_path, retriever.url)
    with running(daemon):
        assert _spool_errors(daemon) == 1
        skipped = _skipped(daemon)
        assert len(skipped) == 1, skipped
        assert "symbolic link" in skipped[0]["reason"]
        kept = tmp_path / skipped[0]["kept_at"]
        assert not _stored(f"sqlite:///{tmp_path / 'ragcanary.db'}") & set(GOOD)
    assert kept.is_symlink()
    assert elsewhere.read_bytes() == b"".join(_line(r) for r in GOOD)


def test_a_link_planted_as_the_spools_temporary_file_is_not_followed(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n", encoding="utf-8")
    planted = tmp_path / (SPOOL + ".tmp")
    planted.symlink_to(victim)
    database = tmp_path / "ragcanary.db"
    storage = f"sqlite:///{database}"
    daemon = _daemon(tmp_path, retriever.url, every="1s")
    with running(daemon):
        daemon.wait_runs("core", "vendor", 1, STORED_S)
        with immutable(database):
            daemon.wait_runs("core", "vendor", 2, STORED_S)
            wait_for(
                lambda: daemon.scrape().number("ragcanary_storage_buffered_runs") >= 1,
                STORED_S,
                "runs to wait for storage",
            )
            code, _took = daemon.stop()
    assert code == 0, daemon.log
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert planted.is_symlink()
    spooled = {json.loads(line)["run_id"] for line in (tmp_path / SPOOL).read_text().splitlines()}
    assert spooled
    assert not spooled & _stored(storage)
    with running(_daemon(tmp_path, retriever.url)):
        wait_for(lambda: spooled <= _stored(storage), STORED_S, "the spooled runs stored")
