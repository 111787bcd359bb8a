"""Declared changes against a real `ragcanary serve` on SQLite and PostgreSQL: the API and the
CLI record them, /metrics holds the pair in maintenance until the window is finished or runs
out, runs inside carry the change's id, and replicas on PostgreSQL agree on the windows."""

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

API_KEY = "sk-changes-5d2"
ADMIN = "adm-changes-8f1"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _daemon(directory: Path, storage: str, url: str) -> DaemonProcess:
    return change_daemon(directory, storage, url, API_KEY, ADMIN)


def _held(daemon: DaemonProcess, pair: tuple[str, str] = CHANGED) -> float | None:
    return daemon.scrape().value("ragcanary_maintenance", suite=pair[0], target=pair[1])


def _newest_run(daemon: DaemonProcess, pair: tuple[str, str], after: str) -> dict[str, Any]:
    """The report of the pair's newest run started after ``after`` (ISO 8601), once there is one."""

    def found() -> dict[str, Any] | None:
        runs = daemon.get("/api/v1/runs", suite=pair[0], target=pair[1], limit=1).json()["runs"]
        if not runs or datetime.fromisoformat(runs[0]["started_at"]) <= _at(after):
            return None
        report: dict[str, Any] = daemon.get(f"/api/v1/runs/{runs[0]['run_id']}").json()
        return report

    return wait_for(found, 20, f"a run of {pair} after {after}")


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _cli(config: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
    if token is not None:
        env["RAGCANARY_ADMIN_TOKEN"] = token
    command = [sys.executable, "-m", "ragcanary", *args]
    if "--url" not in args:
        command += ["-c", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def test_a_change_declared_through_the_api_holds_its_pairs_until_finished(
    tmp_path: Path, store_url: str, retriever: FakeRetriever
) -> None:
    with running(_daemon(tmp_path / "d", store_url, retriever.url)) as daemon:
        wait_for(
            lambda: len(daemon.get("/api/v1/baselines").json()["baselines"]) == 2, 20, "baselines"
        )
        pinned = {
            b["target"]: b["run_id"] for b in daemon.get("/api/v1/baselines").json()["baselines"]
        }
        assert _held(daemon) == 0.0

        assert daemon.post("/api/v1/changes", json=REINDEX).status_code == 401
        wrong = daemon.post("/api/v1/changes", json={**REINDEX, "window": "48h"}, headers=AUTH)
        assert wrong.status_code == 409
        assert wrong.json()["field"] == "window"
        assert "longer than 24h" in wrong.json()["detail"]
        assert '"max": true' in wrong.json()["detail"]
        unknown = daemon.post(
            "/api/v1/changes", json={**REINDEX, "targets": ["docs", "nope"]}, headers=AUTH
        )
        assert (unknown.status_code, unknown.json()["field"]) == (404, "targets[1]")
        not_json = daemon.post("/api/v1/changes", content=b"{kind", headers=AUTH)
        assert not_json.status_code == 400
        blank = daemon.post("/api/v1/changes", json={**REINDEX, "description": " "}, headers=AUTH)
        assert (blank.status_code, blank.json()["field"]) == (422, "description")
        assert daemon.get("/api/v1/changes").json()["changes"] == []

        answer = daemon.post("/api/v1/changes", json={**REINDEX, "window": "30m"}, headers=AUTH)
        assert answer.status_code == 201, answer.text
        change = answer.json()
        change_id = change["id"]
        assert (change["state"], change["finished_at"]) == ("open", None)
        assert _held(daemon) == 1.0  # at once: the daemon read the windows again
        assert _held(daemon, UNTOUCHED) == 0.0

        inside = _newest_run(daemon, CHANGED, change["started_at"])
        assert inside["maintenance"] == {"change_id": change_id, "kind": "reindex"}
        beside = _newest_run(daemon, UNTOUCHED, change["started_at"])
        assert "maintenance" not in beside
        (listed,) = daemon.get("/api/v1/changes").json()["changes"]
        assert (listed["id"], listed["state"], listed["targets"]) == (change_id, "open", ["docs"])

        assert daemon.post(f"/api/v1/changes/{change_id}/finish").status_code == 401
        finished = daemon.post(f"/api/v1/changes/{change_id}/finish", headers=AUTH)
        assert finished.status_code == 200
        assert (finished.json()["state"], finished.json()["ended_by"]) == ("finished", "finish")
        assert _held(daemon) == 0.0
        after = _newest_run(daemon, CHANGED, finished.json()["finished_at"])
        assert "maintenance" not in after
        gone = daemon.post("/api/v1/changes/chg-none/finish", headers=AUTH)
        assert gone.status_code == 404

        # The change pinned nothing: the baselines are the ones pinned before it.
        now = {
            b["target"]: b["run_id"] for b in daemon.get("/api/v1/baselines").json()["baselines"]
        }
        assert now == pinned
        fleet = daemon.get("/ui/").text
        assert change_id in fleet
        assert "rebuild the docs index" in fleet


def test_a_change_declared_with_the_cli_ends_by_its_window_and_re_pins_only_when_asked(
    tmp_path: Path, store_url: str, retriever: FakeRetriever
) -> None:
    daemon = _daemon(tmp_path / "d", store_url, retriever.url)
    with running(daemon):
        too_long = _cli(
            daemon.config, "change", "start", "--kind", "deploy", "--description", "v2",
            "--target", "docs", "--window", "25h",
        )  # fmt: skip
        assert too_long.returncode == 2
        assert "--window: '25h' is longer than 24h" in too_long.stderr
        started = _cli(
            daemon.config, "change", "start", "--kind", "deploy", "--description", "v2",
            "--target", "docs", "--window", "4s",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        change_id = started.stdout.strip()
        assert change_id.startswith("chg-")
        wait_for(lambda: _held(daemon) == 1.0, 10, "the window read by the daemon")
        wait_for(lambda: _held(daemon) == 0.0, 15, "the window to run out")
        listed = _cli(daemon.config, "change", "list", "--url", daemon.url, "--json")
        assert listed.returncode == 0, listed.stderr
        (shown,) = json.loads(listed.stdout)
        assert (shown["id"], shown["state"], shown["ended_by"]) == (change_id, "finished", "window")

        refused = _cli(daemon.config, "change", "finish", change_id, "--url", daemon.url)
        assert refused.returncode == 2
        assert "RAGCANARY_ADMIN_TOKEN" in refused.stderr
        again = _cli(daemon.config, "change", "finish", change_id, "--url", daemon.url, token=ADMIN)
        assert again.returncode == 0, again.stderr
        assert "finished" in again.stdout

        _newest_run(daemon, CHANGED, shown["finished_at"])
        accepted = _cli(
            daemon.config, "baseline", "accept", "--suite", "core", "--target", "docs",
            "--change", change_id,
        )  # fmt: skip
        assert accepted.returncode == 0, accepted.stderr
        (row,) = [
            b for b in daemon.get("/api/v1/baselines").json()["baselines"] if b["target"] == "docs"
        ]
        assert row["reason"] == f"accepted after change {change_id} (deploy: v2)"
        first_after = daemon.get(f"/api/v1/runs/{row['run_id']}").json()
        assert _at(first_after["started_at"]) >= _at(shown["finished_at"])
        assert "maintenance" not in first_after


@pytest.mark.slow
def test_replicas_on_postgresql_agree_on_windows(
    tmp_path: Path, postgres_url: str, retriever: FakeRetriever
) -> None:
    first = _daemon(tmp_path / "a", postgres_url, retriever.url)
    second = _daemon(tmp_path / "b", postgres_url, retriever.url)
    with running(first), running(second):
        answer = first.post("/api/v1/changes", json=REINDEX, headers=AUTH)
        assert answer.status_code == 201, answer.text
        change_id = answer.json()["id"]
        assert _held(first) == 1.0
        wait_for(lambda: _held(second) == 1.0, 10, "the other replica to hold the pair")
        assert second.get("/api/v1/changes").json() == first.get("/api/v1/changes").json()
        finished = second.post(f"/api/v1/changes/{change_id}/finish", headers=AUTH)
        assert finished.status_code == 200
        assert _held(second) == 0.0
        wait_for(lambda: _held(first) == 0.0, 10, "the first replica to release the pair")
        shown = first.get("/api/v1/changes").json()["changes"][0]
        assert (shown["id"], shown["state"]) == (change_id, "finished")
