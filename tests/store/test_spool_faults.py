"""A planted spool link under a real `ragcanary serve`: it follows none, and loses no run.

The spool is the file a daemon leaves at SIGTERM with the runs storage did not take
(store/spool.py). Writing it follows no link planted beside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool
from test_storage_faults import immutable

API_KEY = "sk-spool-faults-9d4"
QUERIES = [f"question {i:02d}" for i in range(4)]
STORED_S = 40.0
SPOOL = "ragcanary.db.spool.jsonl"


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
