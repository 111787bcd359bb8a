"""Three `ragcanary serve` replicas on one PostgreSQL: every tick runs once, through faults.

Each replica reaches the database through a TCP relay of its own, so one of them can be cut
off (its packets dropped with iptables) while the others go on. Twelve jobs run every second;
one replica is killed with SIGKILL and started again, another is cut from the database for a
while. The database must then hold at most one run per (job, tick), every run under the claim
of the replica that ran it, no gap in any job beyond its interval and a few seconds, and the
runs the cut replica finished before the cut.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import pytest
import sqlalchemy
from daemon_harness import DaemonProcess, TcpProxy, free_port, packets_dropped, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from sqlalchemy.pool import NullPool

from ragcanary.serve.replicas.heartbeats import HEARTBEAT_S

pytestmark = pytest.mark.slow

API_KEY = "sk-replicas-4c1"
QUERIES = [f"question {i:02d}" for i in range(4)]
SUITES = [f"s{i}" for i in range(4)]
TARGETS = ["t0", "t1", "t2"]
JOBS = [(s, t) for s in SUITES for t in TARGETS]  # 12 jobs
EVERY_S = 1.0
DEADLINE_S = 40.0
MAX_GAP_S = EVERY_S + 5.0  # failover takes a turn of the preference order, not a timeout


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def replica(directory: Path, storage: str, url: str) -> DaemonProcess:
    directory.mkdir(parents=True, exist_ok=True)
    cases = [
        {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (directory / "cases.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    suite = {"cases": "cases.yaml", "targets": TARGETS, "every": "1s", "k": [1, 5], "depth": 5}
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {t: target_entry(url, timeout="5s", retries=0) for t in TARGETS},
        "suites": dict.fromkeys(SUITES, suite),
    }
    # JSON is YAML, and has no anchors for the suites' shared values (aliases are refused).
    (directory / "ragcanary.yaml").write_text(json.dumps(config), encoding="utf-8")
    env = {"VENDOR_KEY": API_KEY, "RAGCANARY_LOG_FORMAT": "json"}
    return DaemonProcess(directory / "ragcanary.yaml", port, env)


def rows(url: str, sql: str) -> list[sqlalchemy.Row[tuple[object, ...]]]:
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sqlalchemy.text(sql)))
    finally:
        engine.dispose()


def every_pair_shown(daemon: DaemonProcess) -> bool:
    scrape = daemon.scrape()
    return all(scrape.value("ragcanary_coverage_ratio", suite=s, target=t) for s, t in JOBS)


def test_replicas_run_each_tick_once_through_a_kill_and_a_cut(
    tmp_path: Path, retriever: FakeRetriever, postgres_url: str
) -> None:
    direct = sqlalchemy.make_url(postgres_url)
    upstream = (direct.host or "127.0.0.1", direct.port or 5432)
    with TcpProxy(upstream) as relay_a, TcpProxy(upstream) as relay_b, TcpProxy(upstream) as c:
        daemons = {
            name: replica(
                tmp_path / name,
                direct.set(port=relay.port).render_as_string(hide_password=False),
                retriever.url,
            )
            for name, relay in (("a", relay_a), ("b", relay_b), ("c", c))
        }
        a, b, c_daemon = daemons["a"], daemons["b"], daemons["c"]
        with running(a), running(b), running(c_daemon):
            settled = time.time() + 2 * HEARTBEAT_S  # each has seen the others by then
            wait_for(
                lambda: len(_claimed_since(postgres_url, settled)) >= 6 * len(JOBS),
                DEADLINE_S,
                "all three replicas running jobs",
            )
            shares = Counter(_claimed_since(postgres_url, settled).values())
            assert len(shares) == 3, shares
            fair = sum(shares.values()) / 3
            assert max(shares.values()) <= 1.5 * fair, shares
            for daemon in daemons.values():
                wait_for(lambda d=daemon: every_pair_shown(d), DEADLINE_S, "every pair shown")

            a.kill()  # SIGKILL: no goodbye, its claims of the moment are lost with it
            killed_at = time.time()
            wait_for(
                lambda: len(_claimed_since(postgres_url, killed_at + 3)) >= 3 * len(JOBS),
                DEADLINE_S,
                "the others running the killed replica's jobs",
            )
            a.start()
            before_cut = {e["run_id"] for e in b.events() if e.get("event") == "run"}
            with packets_dropped(relay_b.port):
                cut_at = time.time()
                wait_for(
                    lambda: len(_claimed_since(postgres_url, cut_at + 6)) >= 3 * len(JOBS),
                    DEADLINE_S,
                    "the others running the cut replica's jobs",
                )
                cut_runs = _claimed_since(postgres_url, cut_at + 6)
                assert "b" not in {_name(daemons, r) for r in cut_runs.values()}
                ready = b.get("/readyz")
                assert ready.status_code == 503
                assert ready.json()["replica"]["claiming"] is False
                assert "claiming no runs" in ready.json()["reason"]
            # What the cut replica ran meanwhile waits in its buffer and is written once it
            # reconnects; a run of a tick another replica ran meanwhile is left out (the
            # per-tick check below), so the buffer drains either way.
            wait_for(
                lambda: (
                    b.get("/readyz").json().get("buffered_runs") == 0
                    and b.get("/readyz").status_code == 200
                ),
                DEADLINE_S,
                "the cut replica's buffer written once it reconnected",
            )
            assert before_cut <= _stored(postgres_url)
            wait_for(lambda: every_pair_shown(a), DEADLINE_S, "the restarted replica's view")
            wait_for(
                lambda: c_daemon.get("/readyz").json()["replica"]["live_replicas"] == 3,
                DEADLINE_S,
                "the reconnected replica seen alive again",
            )

    runs = rows(postgres_url, "SELECT run_id, suite, target, started_at FROM runs")
    claims = rows(postgres_url, "SELECT job, tick, replica_id, run_id FROM claims")
    claimed = {r.run_id for r in claims}
    assert {r.run_id for r in runs} <= claimed, "a run that no replica claimed"
    per_tick = Counter((r.job, r.tick) for r in claims)
    assert max(per_tick.values()) == 1
    unstored = claimed - {r.run_id for r in runs}
    # Only runs in flight in the killed replica may have vanished: one tick per job at most.
    assert len(unstored) <= len(JOBS), unstored
    starts: dict[str, list[datetime]] = defaultdict(list)
    for run in runs:
        starts[f"{run.suite}/{run.target}"].append(run.started_at)
    assert set(starts) == {f"{s}/{t}" for s, t in JOBS}
    for job, times in starts.items():
        times.sort()
        gap = max((later - earlier).total_seconds() for earlier, later in pairwise(times))
        assert gap <= MAX_GAP_S, f"{job} went {gap:.1f}s without a run"


def _claimed_since(url: str, since: float) -> dict[str, str]:
    """Run id -> replica id of the claims of ticks after ``since`` (Unix time)."""
    found = rows(
        url,
        f"SELECT run_id, replica_id FROM claims WHERE tick > to_timestamp({since!r}) ORDER BY tick",
    )
    return {r.run_id: r.replica_id for r in found}


def _stored(url: str) -> set[str]:
    return {r.run_id for r in rows(url, "SELECT run_id FROM runs")}


def _name(daemons: dict[str, DaemonProcess], replica_id: str) -> str:
    """Which test daemon a replica id belongs to (its id holds the process id)."""
    for name, daemon in daemons.items():
        if daemon.started and f"-{daemon.process.pid}-" in replica_id:
            return name
    return "?"


def test_a_tick_a_dead_replica_claimed_and_never_stored_is_run_again(
    tmp_path: Path, retriever: FakeRetriever, postgres_url: str
) -> None:
    """A replica killed in the middle of a run leaves a claim without a run: a live replica
    takes the claim over and runs that tick, so the job waits no longer than a heartbeat."""
    daemon = replica(tmp_path, postgres_url, retriever.url)
    with running(daemon):
        wait_for(lambda: _stored(postgres_url), DEADLINE_S, "a first run")
        tick = rows(postgres_url, "SELECT now() - interval '15 seconds' AS at")[0].at
        engine = sqlalchemy.create_engine(postgres_url, poolclass=NullPool)
        with engine.begin() as conn:
            conn.execute(
                sqlalchemy.text(
                    "INSERT INTO claims (job, tick, replica_id, run_id, claimed_at) "
                    "VALUES ('s0/t0', :tick, 'killed-replica', 'lost-run', :tick)"
                ),
                {"tick": tick},
            )
        engine.dispose()

        def adopted() -> str | None:
            (claim,) = rows(
                postgres_url,
                f"SELECT run_id, replica_id FROM claims WHERE tick = '{tick.isoformat()}'",
            )
            return claim.run_id if claim.run_id in _stored(postgres_url) else None

        run_id = wait_for(adopted, DEADLINE_S, "the orphaned tick run again")
    assert run_id != "lost-run"
    assert any("re-running a tick" in line for line in daemon.output)
