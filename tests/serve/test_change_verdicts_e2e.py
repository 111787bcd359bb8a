"""A change's verdict against a real `ragcanary serve` and a retriever on 127.0.0.1: the first
run of each pair after a window carries it, judged against the pair's last run before the
change; a re-index that dropped quality fails that run even when it passes its baseline, an
unchanged retriever passes, and an undeclared drop pages as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from change_daemon import CHANGED, QUERIES, REINDEX, UNTOUCHED, change_daemon
from daemon_harness import DaemonProcess, running, wait_for
from retrievers import FakeRetriever, graded_corpus

API_KEY = "sk-verdicts-7c3"
ADMIN = "adm-verdicts-2e9"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _daemon(directory: Path, storage: str, url: str) -> DaemonProcess:
    return change_daemon(directory, storage, url, API_KEY, ADMIN)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _runs(daemon: DaemonProcess, pair: tuple[str, str]) -> list[dict[str, Any]]:
    """The pair's stored runs, the oldest first."""
    found = daemon.get("/api/v1/runs", suite=pair[0], target=pair[1], limit=200).json()["runs"]
    return sorted(found, key=lambda r: (_at(r["started_at"]), r["run_id"]))


def _report(daemon: DaemonProcess, run_id: str) -> dict[str, Any]:
    report: dict[str, Any] = daemon.get(f"/api/v1/runs/{run_id}").json()
    return report


def _after(daemon: DaemonProcess, pair: tuple[str, str], at: str, nth: int = 0) -> dict[str, Any]:
    """The report of the pair's ``nth`` run started at or after ``at``, once it is stored."""

    def found() -> dict[str, Any] | None:
        later = [r for r in _runs(daemon, pair) if _at(r["started_at"]) >= _at(at)]
        return _report(daemon, later[nth]["run_id"]) if len(later) > nth else None

    return wait_for(found, 30, f"run {nth} of {pair} after {at}")


def _last_before(daemon: DaemonProcess, pair: tuple[str, str], at: str) -> str:
    before = [r for r in _runs(daemon, pair) if _at(r["started_at"]) < _at(at)]
    run_id: str = before[-1]["run_id"]
    return run_id


def _held(daemon: DaemonProcess, pair: tuple[str, str] = CHANGED) -> float | None:
    return daemon.scrape().value("ragcanary_maintenance", suite=pair[0], target=pair[1])


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
    command = [sys.executable, "-m", "ragcanary", *args]
    if "--url" not in args:
        command += ["-c", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def _baselines_pinned(daemon: DaemonProcess) -> None:
    wait_for(lambda: len(daemon.get("/api/v1/baselines").json()["baselines"]) == 2, 20, "baselines")


def test_a_window_that_passes_cleanly_ends_with_a_change_verdict_ok(
    tmp_path: Path, store_url: str, retriever: FakeRetriever
) -> None:
    daemon = _daemon(tmp_path / "d", store_url, retriever.url)
    with running(daemon):
        _baselines_pinned(daemon)
        started = daemon.post("/api/v1/changes", json={**REINDEX, "window": "3s"}, headers=AUTH)
        assert started.status_code == 201, started.text
        change = started.json()
        wait_for(lambda: _held(daemon) == 0.0, 15, "the window to run out")
        shown = daemon.get(f"/api/v1/changes/{change['id']}").json()
        assert shown["state"] == "finished"
        first = _after(daemon, CHANGED, shown["finished_at"])
        assert first["outcome"] == "ok"
        assert first["change"]["id"] == change["id"]
        assert first["change"]["verdict"] == "ok"
        assert first["change"]["before_run_id"] == _last_before(
            daemon, CHANGED, change["started_at"]
        )
        assert first["change"]["diagnosis"]["cause"] == "none"
        assert "change" not in _after(daemon, CHANGED, shown["finished_at"], nth=1)
        assert "change" not in _after(daemon, UNTOUCHED, shown["finished_at"])

        def judged() -> dict[str, Any] | None:
            answer = daemon.get(f"/api/v1/changes/{change['id']}").json()
            (verdict,) = answer["verdicts"]
            return verdict if verdict["verdict"] is not None else None

        verdict = wait_for(judged, 10, "the verdict through the API")
        assert (verdict["suite"], verdict["target"], verdict["run_id"]) == (
            "core",
            "docs",
            first["run_id"],
        )
        assert verdict["verdict"] == "ok"
        local = _cli(daemon.config, "change", "show", change["id"], "--json")
        assert local.returncode == 0, local.stderr
        assert json.loads(local.stdout)["verdicts"] == [verdict]


def test_a_declared_reindex_that_drops_quality_is_held_then_fails_the_first_run_after(
    tmp_path: Path, store_url: str, retriever: FakeRetriever
) -> None:
    daemon = _daemon(tmp_path / "d", store_url, retriever.url)
    with running(daemon):
        _baselines_pinned(daemon)
        started = daemon.post("/api/v1/changes", json={**REINDEX, "window": "30m"}, headers=AUTH)
        assert started.status_code == 201, started.text
        change = started.json()
        change_id = change["id"]
        retriever.drop_ids = {"rel-0", "rel-1", "rel-2"}  # the re-index lost them
        inside = _after(daemon, CHANGED, change["started_at"], nth=1)
        assert inside["maintenance"] == {"change_id": change_id, "kind": "reindex"}
        assert inside["outcome"] == "regression"  # measured as it is, its alerts held
        assert "change" not in inside
        assert _held(daemon) == 1.0
        # The undeclared target on the same retriever regresses as before, nothing held.
        undeclared = _after(daemon, UNTOUCHED, change["started_at"], nth=1)
        assert undeclared["outcome"] == "regression"
        assert "maintenance" not in undeclared
        assert "change" not in undeclared
        assert _held(daemon, UNTOUCHED) == 0.0

        # Someone pins the degraded run: the runs after pass their baseline, the change not.
        pinned = daemon.post("/api/v1/baselines/core/docs", json={"run_id": inside["run_id"]})
        assert pinned.status_code == 401
        pinned = daemon.post(
            "/api/v1/baselines/core/docs", json={"run_id": inside["run_id"]}, headers=AUTH
        )
        assert pinned.status_code == 200, pinned.text
        finished = daemon.post(f"/api/v1/changes/{change_id}/finish", headers=AUTH).json()
        assert _held(daemon) == 0.0
        first = _after(daemon, CHANGED, finished["finished_at"])
        assert first["baseline"]["run_id"] == inside["run_id"]
        assert "maintenance" not in first
        before = _last_before(daemon, CHANGED, change["started_at"])
        assert first["change"]["verdict"] == "regression"
        assert first["change"]["before_run_id"] == before
        assert first["change"]["diagnosis"]["cause"] != "none"
        assert first["outcome"] == "regression"
        reasons = [f["message"] for f in first["failures"] if f["kind"] == "change"]
        assert f"change {change_id} (reindex): hit_rate@5 1 → 0 against the last run before it" in (
            reasons
        )
        assert all(f["kind"] == "change" for f in first["failures"])  # it passed its baseline
        second = _after(daemon, CHANGED, finished["finished_at"], nth=1)
        assert "change" not in second  # once per pair
        assert second["outcome"] == "ok"  # against the pinned, degraded run

        # The regression pages like any other: the outcome gauge says so, nothing holds it.
        shown = daemon.get(f"/api/v1/changes/{change_id}").json()
        (verdict,) = shown["verdicts"]
        assert (verdict["run_id"], verdict["verdict"]) == (first["run_id"], "regression")
        fleet = daemon.get("/ui/").text
        assert 'data-pair="core/docs" data-verdict="regression"' in fleet
        page = daemon.get(f"/ui/runs/{first['run_id']}").text
        assert f'data-change="{change_id}" data-verdict="regression"' in page
        assert "against the last run before it" in page
        remote = _cli(daemon.config, "changes", "show", change_id, "--url", daemon.url)
        assert remote.returncode == 0, remote.stderr
        assert "regression" in remote.stdout
        assert first["run_id"] in remote.stdout


@pytest.mark.slow
def test_replicas_on_postgresql_attach_a_change_s_verdict_once_per_pair(
    tmp_path: Path, postgres_url: str, retriever: FakeRetriever
) -> None:
    first = _daemon(tmp_path / "a", postgres_url, retriever.url)
    second = _daemon(tmp_path / "b", postgres_url, retriever.url)
    with running(first), running(second):
        _baselines_pinned(first)
        started = first.post("/api/v1/changes", json={**REINDEX, "window": "30m"}, headers=AUTH)
        assert started.status_code == 201, started.text
        change = started.json()
        _after(first, CHANGED, change["started_at"], nth=2)  # runs inside, by either replica
        finished = second.post(f"/api/v1/changes/{change['id']}/finish", headers=AUTH).json()
        end = finished["finished_at"]
        _after(first, CHANGED, end, nth=4)  # a few ticks after, spread over both replicas
        after = [r for r in _runs(first, CHANGED) if _at(r["started_at"]) >= _at(end)]
        carried = [
            report for report in (_report(first, r["run_id"]) for r in after) if "change" in report
        ]
        assert [r["run_id"] for r in carried] == [after[0]["run_id"]]
        assert carried[0]["change"]["verdict"] == "ok"
        assert (
            second.get(f"/api/v1/changes/{change['id']}").json()
            == first.get(f"/api/v1/changes/{change['id']}").json()
        )
