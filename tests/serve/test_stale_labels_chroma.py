"""Stale labels over a daemon watching a real Chroma: judged chunks deleted through Chroma's
own API are named at the first run after the deletion, by the gauge and by the page, with
the time the index was looked up.

Needs Chroma (.venv-chroma): skipped without it unless RAGCANARY_REQUIRE_CHROMA=1.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from chroma_server import chroma_binary, chroma_server, create_collection, delete_chunks
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from retrievers import EmbeddingServer

from ragcanary.serve.http.ui.render import when

DIMENSIONS = 8
DEPTH = 3
QUERIES = [f"how do I configure feature {i}" for i in range(6)]
RELEVANT = {f"q{i}": f"doc-{i}" for i in range(len(QUERIES))}  # chroma_server's layout
DELETED = ("q1", "q4")  # their relevant chunks leave the collection
RUN_TIMEOUT_S = 30.0
LABELS = {"suite": "core", "target": "kb"}


def _config(home: Path, port: int, chroma: str, embedder: str) -> Path:
    suite = {
        "cases": [
            {"id": case, "query": QUERIES[i], "relevant": [RELEVANT[case]]}
            for i, case in enumerate(RELEVANT)
        ]
    }
    (home / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{home / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "embeddings": {"toy": {"url": embedder, "model": "toy-1", "retries": 0}},
        "targets": {
            "kb": {
                "preset": "chroma",
                "url": chroma,
                "collection": "kb-docs",
                "embedding": "toy",
                "id": "metadata.doc_id",
                "retries": 0,
            }
        },
        # The default stale_label_runs (50): the index is asked at the first run, then only
        # now and then, unless a relevant id leaves the top-k.
        "suites": {
            "core": {
                "cases": "suite.yaml",
                "targets": ["kb"],
                "every": "1s",
                "k": [1, DEPTH],
                "depth": DEPTH,
            }
        },
    }
    path = home / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return path


def _runs_after(daemon: DaemonProcess, moment: datetime) -> list[dict[str, Any]]:
    """The stored runs of core on kb that started after ``moment``, oldest first."""
    found = daemon.get("/api/v1/runs", suite="core", target="kb", limit=1000).json()["runs"]
    later = [r for r in found if datetime.fromisoformat(r["started_at"]) > moment]
    return sorted(later, key=lambda r: r["started_at"])


def test_judged_chunks_deleted_from_chroma_are_stale_at_the_first_run_after(
    tmp_path: Path,
) -> None:
    """The index is asked again as soon as a relevant id leaves its canary's top-k, however
    recently it was asked: the first run after the deletion counts both ids, and the stale
    page names them and when it looked."""
    chroma_binary()  # skip (or fail in CI) before starting anything
    with (
        chroma_server(tmp_path) as chroma,
        EmbeddingServer(dimensions=DIMENSIONS) as embedder,
    ):
        collection = create_collection(chroma, "kb-docs", QUERIES, DIMENSIONS)
        port = free_port()
        with running(DaemonProcess(_config(tmp_path, port, chroma, embedder.url), port, {})) as d:
            wait_for(
                lambda: d.scrape().value("ragcanary_stale_labels", **LABELS) == 0,
                RUN_TIMEOUT_S,
                "a run that asked the index and found every relevant id",
            )
            delete_chunks(chroma, collection, [f"chunk-{c.removeprefix('q')}-0" for c in DELETED])
            deleted_at = datetime.now(UTC)
            first = wait_for(lambda: _runs_after(d, deleted_at), RUN_TIMEOUT_S, "a run after")[0]
            report = d.get(f"/api/v1/runs/{first['run_id']}").json()
            gauge = d.scrape().value("ragcanary_stale_labels", **LABELS)
            page = d.get("/ui/stale-labels").text
            # The page shows the newest answered run: the first after the deletion or a later one.
            shown_id = re.search(r'As of <a href="/ui/runs/([^"]+)">', page)
            assert shown_id is not None, page
            shown = d.get(f"/api/v1/runs/{shown_id.group(1)}").json()
            diff = d.get("/ui/diff", suite="core", target="kb", to=first["run_id"]).text
            case_page = d.get("/ui/case", suite="core", case=DELETED[0], target="kb").text

    found = [(s["case"], s["id"], s["reason"]) for s in report["stale_labels"]]
    assert found == [(case, RELEVANT[case], "missing") for case in DELETED]
    assert gauge == len(DELETED)
    # When it looked: in that run, after the deletion, for the ids that left the top-k.
    looked = report["index_lookup"]
    assert sorted(looked["left"]) == sorted(RELEVANT[case] for case in DELETED)
    assert datetime.fromisoformat(looked["left_at"]) > deleted_at
    assert {s["looked_up_at"] for s in report["stale_labels"]} == {looked["left_at"]}
    # The page names both, each with when the index said it no longer holds it.
    assert datetime.fromisoformat(shown["started_at"]) >= datetime.fromisoformat(
        first["started_at"]
    )
    rows = re.findall(
        r'<tr data-reason="missing">.*?<code>([^<]+)</code>.*?'
        r'<td data-label="Looked up">([^<]+)</td>',
        page,
        re.S,
    )
    at = when(shown["index_lookup"]["left_at"])
    assert sorted(rows) == sorted((RELEVANT[case], at) for case in DELETED)
    assert f"that left the top-k of their canary looked up again {html.escape(at)}" in page
    # The diff to that run and the case page say when the index was looked up, too.
    for case in DELETED:
        stale = f'<code>{RELEVANT[case]}</code> <span class="mark stale">left the index</span>'
        assert f"{stale} (index looked up {when(looked['left_at'])})" in diff
    on_case = re.search(r"left the index</span> \(index looked up ([^)]+)\)", case_page)
    assert on_case is not None, case_page
    assert on_case.group(1).endswith(" UTC")
    assert datetime.strptime(on_case.group(1), "%Y-%m-%d %H:%M:%S UTC").replace(
        tzinfo=UTC
    ) >= deleted_at.replace(microsecond=0)
