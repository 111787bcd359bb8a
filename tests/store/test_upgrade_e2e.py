"""Upgrading a database the previous release wrote (schema version 6) to version 7, at scale.

Thousands of runs as version 6 stored them (tests/version6.py): two targets of one suite,
rankings that change now and then, regressions, unavailable runs, a pinned baseline and runs
with query vectors, on SQLite and on PostgreSQL. What the readers answer after the upgrade is
checked twice: against what the reports themselves say, and against a version-7 store the same
reports were saved into (``save_run``). An upgrade that fails half-way leaves version 6 as it
was; `ragcanary serve` upgrades a version-6 file at start and serves its old runs.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from factories import case_entry, report_data
from retrievers import FakeRetriever, target_entry
from sqlalchemy.pool import NullPool
from structlog.testing import capture_logs
from version6 import write_version6

from ragcanary.measure.case_verdict import RunFindings
from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.run_report import RunReport
from ragcanary.store import migrations
from ragcanary.store.engine import make_engine
from ragcanary.store.storage import Store

pytestmark = pytest.mark.e2e

LATEST = migrations.latest_version(migrations.UPGRADES)
START = datetime(2026, 2, 1, tzinfo=UTC)
SUITE = "core"
TARGETS = ("search", "backup")  # runs alternate between the two
PINNED = ("core", "search", "run-00010")  # the pinned baseline of core on search
MANY = 2_000  # runs of the upgrades measured at scale
FEW = 300  # runs of the tests about something else than scale
VERSION6_TABLES = ("runs", "results", "points", "vectors", "baselines", "schema_version")
UPGRADE_LOG = "upgrading storage to schema version 7"


def _vector(seed: int) -> str:
    """A query vector as a report holds it: base64 of little-endian float32."""
    rng = random.Random(seed)
    return base64.b64encode(struct.pack("<8f", *(rng.uniform(-1, 1) for _ in range(8)))).decode()


def _cases(i: int, count: int) -> list[str]:
    """The canaries of run ``i`` of ``count``: one joins half-way, another leaves at 3/4."""
    ids = ["alpha", "beta", "gamma", "neg", "free"]
    if i >= count // 2:
        ids.insert(2, "late")
    if i >= count * 3 // 4:
        ids.remove("beta")
    return ids


def _ranking(case_id: str, epoch: int) -> tuple[list[str], list[float]]:
    """A canary's ranking in an epoch: the same ids and scores until the epoch changes."""
    ids = [f"{case_id}-doc-{(epoch + j) % 30:02d}" for j in range(10)]
    return ids, [round(0.91 - j * 0.031 - epoch * 0.0007, 6) for j in range(10)]


def version6_reports(count: int) -> list[RunReport]:
    """``count`` runs of suite core, alternating between two targets, five minutes apart.

    Every canary keeps its ranking for 40 runs of its own (each canary changes at another run);
    latencies differ every run. Every 41st run regressed (alpha reordered, a leak of neg),
    every 97th was unavailable (every query timed out), every 25th has query vectors; runs of
    search after the pinned baseline carry a comparison with it.
    """
    rng = random.Random(37)
    reports = []
    for i in range(count):
        run_id = f"run-{i:05d}"
        target = TARGETS[i % 2]
        outcome = "unavailable" if i % 97 == 13 else "regression" if i % 41 == 7 else "ok"
        compared = target == "search" and i > 10
        vectors = i % 25 == 0 or run_id == PINNED[2]
        entries = []
        for c, case_id in enumerate(_cases(i, count)):
            kind = {"neg": "negative", "free": "label_free"}.get(case_id, "labelled")
            epoch = (i + 7 * c) // 40
            ids, scores = _ranking(case_id, epoch)
            latency = round(0.004 + rng.random() / 20, 6)
            more: dict[str, Any] = {}
            if outcome == "unavailable":
                entry = case_entry(
                    case_id, kind=kind, outcome="timeout", latency_s=None, error="timed out"
                )
                entries.append(entry)
                continue
            if outcome == "regression" and case_id == "alpha":
                ids, scores = ids[3:] + ids[:3], scores
            if compared:
                more["vs_baseline"] = {
                    "rbo": round(1.0 - (epoch % 4) * 0.05, 6),
                    "jaccard": 1.0,
                    "entered": [],
                    "left": [],
                    "top_score_delta": round(-epoch * 0.0007, 6),
                }
            if vectors and kind != "label_free":
                more["embedding_cosine"] = 0.9987
                more["query_vector"] = _vector(i * 10 + c)
            metrics = {"hit_rate@5": 1.0, "rr": 1.0 / (1 + epoch % 3)}
            if kind == "negative":
                metrics = {}
            entries.append(
                case_entry(
                    case_id,
                    kind=kind,
                    ids=ids,
                    scores=scores,
                    latency_s=latency,
                    metrics=metrics,
                    **more,
                )
            )
        fields: dict[str, Any] = {}
        if outcome == "regression":
            fields["regressions"] = [
                {"case": "alpha", "metric": "rr", "baseline": 1.0, "current": 0.25}
            ]
            fields["failures"] = [
                {"kind": "drop", "metric": "mrr", "case": None, "message": "mrr fell 0.15"},
                {"kind": "negative_leak", "metric": None, "case": "neg", "message": "leaked"},
            ]
        if compared:
            fields["baseline"] = {
                "run_id": PINNED[2],
                "deltas": {"mrr": round(-(i % 5) * 0.01, 4), "hit_rate@5": 0.0},
                "p_values": {"mrr": 0.5},
                "ci": {"mrr": [-0.02, 0.01]},
                "win_tie_loss": {"mrr": [0, 4, 1]},
                "rank_overlap": 0.95,
                "score_drift": 0.001,
                "score_drifted_ratio": 0.0,
                "score_shift": 0.0,
                "top_score_delta": 0.0,
                "embedding_drift": None,
                "embedding_changed_ratio": None,
                "embedding_dimensions": None,
            }
        if i % 3 == 0 and outcome != "unavailable":
            fields["metrics_by_tag"] = {"billing": {"mrr": 0.5 + (i // 300) * 0.01}}
        answered = outcome != "unavailable"
        data = report_data(
            run_id,
            suite=SUITE,
            target=target,
            started_at=START + timedelta(minutes=5 * i),
            duration_s=round(0.2 + rng.random(), 6),
            outcome=outcome,
            coverage=1.0 if answered else 0.0,
            metrics={"hit_rate@5": 1.0, "mrr": 0.8} if answered else {"hit_rate@5": None},
            cases=entries,
            **fields,
        )
        reports.append(unmarshal(data))
    return reports


# What the readers must answer, from the reports alone -----------------------------------------


def expected_history(
    reports: Sequence[RunReport], case_id: str, target: str | None = None
) -> list[dict[str, Any]]:
    """``Store.case_history(SUITE, case_id, target)`` as the reports say it."""
    rows = []
    for report in sorted(reports, key=lambda r: (r.started_at, r.run_id)):
        if target is not None and report.target != target:
            continue
        findings = RunFindings.of_report(report)
        for entry in report.cases:
            if entry.id != case_id:
                continue
            rows.append(
                {
                    "run_id": report.run_id,
                    "started_at": report.started_at,
                    "target": report.target,
                    "run_outcome": report.outcome,
                    "outcome": entry.outcome,
                    "error": entry.error,
                    "latency_s": entry.latency_s,
                    "top_score": entry.scores[0] if entry.scores else None,
                    "ids": list(entry.ids),
                    "verdict": findings.verdict(entry.id, entry.outcome),
                }
            )
    return rows


def expected_summaries(reports: Sequence[RunReport]) -> list[dict[str, Any]]:
    """``Store.list_runs(limit=everything)`` as the reports say it: newest first."""
    newest_first = sorted(reports, key=lambda r: (r.started_at, r.run_id), reverse=True)
    return [
        {
            "run_id": r.run_id,
            "suite": r.suite,
            "target": r.target,
            "started_at": r.started_at,
            "duration_s": r.duration_s,
            "outcome": r.outcome,
            "coverage": r.coverage,
            "metrics": marshal(r)["metrics"],
            "deltas": dict(r.baseline.deltas) if r.baseline is not None else None,
        }
        for r in newest_first
    ]


def expected_returned(reports: Sequence[RunReport]) -> dict[str, set[str]]:
    """``Store.returned_by(SUITE, every run)`` as the reports say it: a run whose cases all
    came back empty (an unavailable run's) is there with no ids, as version 6 gave it."""
    return {r.run_id: {i for entry in r.cases for i in entry.ids} for r in reports if r.cases}


def case_ids(reports: Sequence[RunReport]) -> list[str]:
    return sorted({entry.id for r in reports for entry in r.cases})


def without_vectors(report: RunReport | None) -> dict[str, Any] | None:
    """A report's JSON without its query vectors: what a version-7 store that forgot them
    (every run but the pinned and newest with vectors) gives back."""
    if report is None:
        return None
    data = marshal(report)
    data["cases"] = [{k: v for k, v in c.items() if k != "query_vector"} for c in data["cases"]]
    return data


def assert_reads_as(store: Store, reports: Sequence[RunReport], reference: Store) -> None:
    """``store`` answers every reader as the reports say, and as ``reference`` does (a
    version-7 store the same reports were saved into), query vectors aside."""
    everything = len(reports) + 10
    summaries = expected_summaries(reports)
    assert store.list_runs(limit=everything) == summaries
    assert reference.list_runs(limit=everything) == summaries
    for target in TARGETS:
        for outcome in (None, "ok", "regression", "unavailable"):
            wanted = [
                s for s in summaries if s["target"] == target and outcome in (None, s["outcome"])
            ]
            got = store.list_runs(SUITE, target, limit=everything, outcome=outcome)
            assert got == wanted, (target, outcome)
        latest = store.latest_run(SUITE, target)
        assert latest == reference.latest_run(SUITE, target)
        assert latest is not None
        assert latest["outcome"] != "unavailable"
    for case_id in case_ids(reports):
        history = store.case_history(SUITE, case_id)
        assert history == expected_history(reports, case_id), case_id
        assert history == reference.case_history(SUITE, case_id), case_id
        on_backup = store.case_history(SUITE, case_id, target="backup")
        assert on_backup == expected_history(reports, case_id, "backup"), case_id
    run_ids = [r.run_id for r in reports]
    returned = store.returned_by(SUITE, run_ids)
    assert returned == expected_returned(reports)
    assert returned == reference.returned_by(SUITE, run_ids)
    assert store.get_baseline("core", "search") == PINNED[2]
    assert store.get_baseline("core", "backup") is None
    for report in reports:
        stored = store.get_report(report.run_id)
        assert stored == report, report.run_id  # version 6 kept every vector it was given
        assert without_vectors(stored) == without_vectors(reference.get_report(report.run_id))


# Fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many() -> list[RunReport]:
    return version6_reports(MANY)


@pytest.fixture(scope="module")
def few() -> list[RunReport]:
    return version6_reports(FEW)


def _reference(directory: Path, reports: Sequence[RunReport]) -> Iterator[Store]:
    """A version-7 SQLite store holding ``reports``, saved as the daemon saves runs."""
    with Store.from_url(f"sqlite:///{directory / 'reference.db'}") as store:
        store.migrate()
        for report in reports:
            store.save_run(report)
        store.set_baseline(*PINNED)
        yield store


@pytest.fixture(scope="module")
def many_reference(
    many: list[RunReport], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    yield from _reference(tmp_path_factory.mktemp("many"), many)


@pytest.fixture(scope="module")
def few_reference(
    few: list[RunReport], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    yield from _reference(tmp_path_factory.mktemp("few"), few)


@pytest.fixture(params=["sqlite", "postgres"])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database to write version 6 into: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'version6.db'}"
    return str(request.getfixturevalue("postgres_url"))


def snapshot(url: str) -> dict[str, Any]:
    """Every table's columns and rows (sorted), for checking a database was left as it was."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            inspector = sqlalchemy.inspect(conn)
            found: dict[str, Any] = {}
            for table in sorted(inspector.get_table_names()):
                columns = [c["name"] for c in inspector.get_columns(table)]
                rows = conn.execute(sqlalchemy.text(f'SELECT * FROM "{table}"')).all()
                found[table] = (columns, sorted(map(repr, rows)))
            return found
    finally:
        engine.dispose()


# Tests -------------------------------------------------------------------------------------------


def test_thousands_of_version6_runs_upgrade_and_read_as_before(
    old_url: str, many: list[RunReport], many_reference: Store
) -> None:
    """2,000 runs written by the previous release upgrade to version 7 in place, every run
    kept, and every reader answers as the reports say, with progress in the log."""
    started = time.monotonic()
    write_version6(old_url, many, [PINNED])
    written = time.monotonic()
    with Store.from_url(old_url) as store:
        assert store.schema_version() == 6
        with capture_logs() as logs:
            store.migrate()
        upgraded = time.monotonic()
        assert store.schema_version() == LATEST
        assert_reads_as(store, many, many_reference)
    print(
        f"\n{old_url.split(':')[0]}: {len(many)} runs written at version 6 in "
        f"{written - started:.1f} s, upgraded in {upgraded - written:.1f} s, read back in "
        f"{time.monotonic() - upgraded:.1f} s"
    )
    progress = [e for e in logs if e["event"] == UPGRADE_LOG]
    assert progress[0] == {"event": UPGRADE_LOG, "log_level": "info", "runs": MANY}
    done = [e["runs_done"] for e in progress[1:]]
    batch = migrations.BACKFILL_RUNS
    assert done == [*range(batch, MANY, batch), MANY]
    assert all(e["runs"] == MANY for e in progress[1:])
    tables = snapshot(old_url)
    assert "results" not in tables
    assert "points" not in tables
    assert len(tables["runs"][1]) == MANY
    assert len(tables["answers"][1]) == sum(len(r.cases) for r in many)


def test_an_upgrade_that_fails_half_way_leaves_version6_whole(
    old_url: str, few: list[RunReport], few_reference: Store
) -> None:
    """An upgrade to version 7 that fails after rebuilding every run (its last steps undone)
    leaves version 6's tables and every row as they were; a later upgrade succeeds."""
    write_version6(old_url, few, [PINNED])
    before = snapshot(old_url)
    assert len(before["results"][1]) == sum(len(r.cases) for r in few)

    def share_then_fail(conn: sqlalchemy.Connection) -> None:
        migrations._share_rankings(conn)
        raise RuntimeError("the disk filled up as the upgrade committed")

    failing = {**migrations.UPGRADES, 6: share_then_fail}
    with Store(make_engine(old_url), upgrades=failing) as store:
        with pytest.raises(RuntimeError, match="disk filled up"):
            store.migrate()
        assert store.schema_version() == 6
    assert snapshot(old_url) == before

    with Store.from_url(old_url) as store:
        store.migrate()
        assert store.schema_version() == LATEST
        assert_reads_as(store, few, few_reference)


def test_serve_upgrades_a_version6_file_at_start_and_serves_its_runs(
    few: list[RunReport], tmp_path: Path
) -> None:
    """`ragcanary serve` on a SQLite file of the previous release upgrades it as it starts,
    and the API gives every old run back as its report's JSON."""
    path = tmp_path / "ragcanary.db"
    write_version6(f"sqlite:///{path}", few, [PINNED])
    (tmp_path / "canaries.yaml").write_text(
        json.dumps({"cases": [{"id": "alpha", "query": "query alpha", "relevant": ["x"]}]}),
        encoding="utf-8",
    )
    port = free_port()
    with FakeRetriever(api_key="sk-v6") as retriever:
        config = {
            "storage": f"sqlite:///{path}",
            "listen": f"127.0.0.1:{port}",
            "targets": {"vendor": target_entry(retriever.url, timeout="5s", retries=0)},
            # A suite of its own, every hour: the old runs are all there is to read.
            "suites": {"other": {"cases": "canaries.yaml", "targets": ["vendor"], "every": "1h"}},
        }
        (tmp_path / "ragcanary.yaml").write_text(config_yaml(config), encoding="utf-8")
        daemon = DaemonProcess(tmp_path / "ragcanary.yaml", port, {"VENDOR_KEY": "sk-v6"})
        with running(daemon):

            def listed() -> list[dict[str, Any]]:
                response = daemon.get("/api/v1/runs", suite=SUITE, limit=1000)
                assert response.status_code == 200, response.text
                runs: list[dict[str, Any]] = response.json()["runs"]
                return runs

            runs = wait_for(listed, 60, "the old runs listed")
            assert [run["run_id"] for run in runs] == [s["run_id"] for s in expected_summaries(few)]
            for report in few:
                response = daemon.get(f"/api/v1/runs/{report.run_id}")
                assert response.status_code == 200, response.text
                assert response.json() == marshal(report), report.run_id
            # A daemon pins a pair's first healthy run: the other suite's may be pinned by now.
            pinned = daemon.get("/api/v1/baselines").json()["baselines"]
            old = [(b["suite"], b["target"], b["run_id"]) for b in pinned if b["suite"] == SUITE]
            assert old == [PINNED]
            code, _ = daemon.stop()
        assert code == 0, daemon.log[-4000:]
        upgrade = [e for e in daemon.events() if e["event"] == UPGRADE_LOG]
        done = [None, migrations.BACKFILL_RUNS, FEW]  # FEW: more runs than one batch
        assert [e.get("runs_done") for e in upgrade] == done, upgrade
    with Store.from_url(f"sqlite:///{path}") as store:
        assert store.schema_version() == LATEST
