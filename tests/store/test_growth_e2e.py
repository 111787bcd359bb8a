"""Issue 37 as it is checked: `ragcanary serve` against an unchanged retriever, 200 canaries
every second, stopped with SIGTERM after a first stretch and again after 60 more runs; the
database grows by at most 100 bytes per canary-run stored in between, and the newest run
reads back through the API with every canary's full ranking.

The daemon is `python -m ragcanary serve` as a process of its own (tests/daemon_harness.py),
the retriever a real HTTP server on 127.0.0.1 (tests/retrievers.py, served from a thread of
the test's process), the database a SQLite file or a schema of its own on the local
PostgreSQL. No checkpoint and no VACUUM: the files and relations are measured as the daemon
leaves them. On PostgreSQL a VACUUM of the schema's tables while the test runs (autovacuum,
or a database-wide VACUUM of another session) adds each table's free-space and visibility
maps, 32 kB a table, to the growth: the failure message shows the growth by relation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from daemon_harness import DaemonProcess, config_yaml, free_port, running
from retrievers import FakeRetriever, target_entry
from sqlalchemy.pool import NullPool

pytestmark = pytest.mark.e2e

API_KEY = "sk-growth-37"
CANARIES = 200
DEPTH = 20
FIRST_RUNS = 5  # the first stretch: every canary's ranking stored once
MEASURED_RUNS = 60  # the stretch the growth is divided over
GOAL_BYTES = 100.0  # issue 37: an unchanged canary-run costs at most this on disk
POLL_S = 0.5  # between two looks at the stored runs: each is a query the daemon answers
# A run of 200 canaries may outlast its 1-second tick on 2 shared cores (ticks are skipped
# then): room for runs twice as long, and for a slow start.
FIRST_S = 60.0
MEASURED_S = 3.0 * MEASURED_RUNS + 30.0
SQLITE_FILES = ("", "-wal", "-shm")  # what a SQLite database in WAL mode is on disk
QUERIES = [f"how do I configure feature {i:03d} of the product?" for i in range(CANARIES)]


def _corpus() -> dict[str, list[tuple[str, float]]]:
    """Every query's ranking, fixed: 24 documents (more than the depth asked), distinct scores."""
    return {
        query: [(f"doc-{i:03d}-{r:02d}", round(0.97 - r * 0.0173 - i * 1e-5, 6)) for r in range(24)]
        for i, query in enumerate(QUERIES)
    }


@dataclass
class Database:
    """The daemon's storage URL and how big its files or relations are right now."""

    url: str
    sqlite_file: Path | None  # None on PostgreSQL

    @property
    def backend(self) -> str:
        return "PostgreSQL" if self.sqlite_file is None else "SQLite"

    def size(self) -> int:
        """How many bytes the database takes: the sum of ``parts``."""
        return sum(self.parts().values())

    def parts(self) -> dict[str, int]:
        """SQLite: the database file and its WAL and shared-memory index as they are on disk;
        PostgreSQL: every relation of the schema the URL's search_path names, a table with
        its TOAST and maps (pg_table_size), an index, a sequence; together what
        pg_total_relation_size counts of the schema's tables."""
        if self.sqlite_file is not None:
            files = [self.sqlite_file.with_name(self.sqlite_file.name + s) for s in SQLITE_FILES]
            return {f.name: f.stat().st_size for f in files if f.exists()}
        query = """
            SELECT c.relname,
                CASE WHEN c.relkind IN ('r', 'p', 'm') THEN pg_table_size(c.oid)
                ELSE pg_relation_size(c.oid) END
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'm', 'i', 'S')
        """
        return {str(name): int(size) for name, size in self._rows(query)}

    def canary_runs(self) -> tuple[int, int]:
        """How many runs and answers (canary-runs) are stored."""
        runs = int(self._scalar("SELECT count(*) FROM runs"))
        return runs, int(self._scalar("SELECT count(*) FROM answers"))

    def newest_run(self) -> str:
        return str(self._scalar("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1"))

    def _scalar(self, sql: str) -> Any:
        return self._rows(sql)[0][0]

    def _rows(self, sql: str) -> list[Any]:
        url = self.url
        if self.sqlite_file is not None:
            # Read-only: a reader that closes the last connection would checkpoint the WAL
            # into the file, changing what the next measurement sees.
            url = f"sqlite:///file:{self.sqlite_file}?mode=ro&uri=true"
        engine = sqlalchemy.create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                return list(conn.execute(sqlalchemy.text(sql)).all())
        finally:
            engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    if request.param == "sqlite":
        path = tmp_path / "db" / "ragcanary.db"
        path.parent.mkdir()
        return Database(f"sqlite:///{path}", path)
    return Database(str(request.getfixturevalue("postgres_url")), None)


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=_corpus(), api_key=API_KEY) as serving:
        yield serving


def _daemon(directory: Path, storage: str, retriever_url: str) -> DaemonProcess:
    """A daemon of one suite of 200 labelled canaries every second at depth 20."""
    cases = [
        {"id": f"canary-{i:03d}", "query": query, "relevant": [f"doc-{i:03d}-{i % 5:02d}"]}
        for i, query in enumerate(QUERIES)
    ]
    (directory / "canaries.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(retriever_url, timeout="5s", retries=0)},
        "suites": {
            "core": {
                "cases": "canaries.yaml",
                "targets": ["vendor"],
                "every": "1s",
                "depth": DEPTH,
            }
        },
    }
    path = directory / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return DaemonProcess(path, port, {"VENDOR_KEY": API_KEY})


def _stored(daemon: DaemonProcess) -> list[dict[str, Any]]:
    response = daemon.get("/api/v1/runs", suite="core", target="vendor", limit=1000)
    assert response.status_code == 200, response.text
    runs: list[dict[str, Any]] = response.json()["runs"]
    return runs


def _wait_stored(daemon: DaemonProcess, at_least: int, within_s: float) -> list[dict[str, Any]]:
    """Poll the API until ``at_least`` runs are stored; fail with the daemon's log otherwise."""
    deadline = time.monotonic() + within_s
    while True:
        runs = _stored(daemon)
        if len(runs) >= at_least:
            return runs
        if daemon.process.poll() is not None:
            raise AssertionError(
                f"the daemon exited with {daemon.process.returncode}:\n{daemon.log}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(runs)} of {at_least} runs stored after {within_s:g} s:\n{daemon.log[-4000:]}"
            )
        time.sleep(POLL_S)  # the poll interval, not a wait for the runs


def _stretch(daemon: DaemonProcess, at_least: int, within_s: float) -> float:
    """Start the daemon, wait for ``at_least`` stored runs, SIGTERM it; the seconds it ran."""
    started = time.monotonic()
    with running(daemon):
        _wait_stored(daemon, at_least, within_s)
        code, _ = daemon.stop()
    assert code == 0, daemon.log[-4000:]
    return time.monotonic() - started


def test_an_unchanged_canary_run_costs_at_most_100_bytes_and_reads_back_whole(
    database: Database, retriever: FakeRetriever, tmp_path: Path
) -> None:
    """Growth over 60 runs of 200 unchanged canaries, per canary-run, is within issue 37's
    goal, and the newest run read through the API holds every canary's 20 ids and scores."""
    directory = tmp_path / "config"
    directory.mkdir()

    def make() -> DaemonProcess:
        return _daemon(directory, database.url, retriever.url)

    _stretch(make(), FIRST_RUNS, FIRST_S)
    before = database.parts()
    runs_before, answers_before = database.canary_runs()
    assert answers_before == runs_before * CANARIES

    seconds = _stretch(make(), runs_before + MEASURED_RUNS, MEASURED_S)
    after = database.parts()
    runs_after, answers_after = database.canary_runs()
    assert answers_after == runs_after * CANARIES  # every run stored whole
    canary_runs = answers_after - answers_before
    assert canary_runs >= MEASURED_RUNS * CANARIES
    growth = sum(after.values()) - sum(before.values())
    per_canary_run = growth / canary_runs
    grown = {
        name: round((after.get(name, 0) - before.get(name, 0)) / canary_runs, 1)
        for name in sorted(set(before) | set(after), key=lambda n: -after.get(n, 0))
        if after.get(name, 0) != before.get(name, 0)
    }
    figure = (
        f"{database.backend}: {growth} bytes over {runs_after - runs_before} runs "
        f"({canary_runs} canary-runs) in {seconds:.1f} s: {per_canary_run:.1f} bytes per "
        f"canary-run (of which {grown}); {sum(after.values())} bytes in all"
    )
    print("\n" + figure)
    assert per_canary_run <= GOAL_BYTES, figure

    newest = database.newest_run()
    with running(make()) as daemon:
        listed = _stored(daemon)
        assert listed, "the restarted daemon lists no runs"
        assert {run["outcome"] for run in listed} == {"ok"}
        # The run the second stretch stored last, and whatever is newest now.
        for run_id in {newest, listed[0]["run_id"]}:
            response = daemon.get(f"/api/v1/runs/{run_id}")
            assert response.status_code == 200, response.text
            _assert_full_rankings(response.json(), retriever)


def _assert_full_rankings(report: dict[str, Any], retriever: FakeRetriever) -> None:
    """Every canary of ``report`` holds the 20 ids and scores the retriever answered."""
    cases = report["cases"]
    assert [case["id"] for case in cases] == [f"canary-{i:03d}" for i in range(CANARIES)]
    for case in cases:
        answered = retriever.corpus[case["query"]][:DEPTH]
        assert case["outcome"] == "ok", case
        assert case["ids"] == [doc for doc, _ in answered], case["id"]
        assert case["scores"] == [score for _, score in answered], case["id"]
