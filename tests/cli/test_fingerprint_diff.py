"""Fingerprints end to end: a daemon measures a real Chroma collection; chunks are deleted, then
the embedding model is renamed in the config. `ragcanary diff` says each first, and the pinned
baseline is flagged by `baseline show`, the API and the pages (docs/report.md, "fingerprint")."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chroma_server import CHUNKS_PER_QUERY, chroma_server, create_collection, delete_chunks
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from retrievers import EmbeddingServer
from typer.testing import CliRunner

from ragcanary.cli.app import app

pytestmark = pytest.mark.e2e

DIMENSIONS = 8
QUERIES = [f"how do I configure feature {i}" for i in range(6)]
DOCUMENTS = len(QUERIES) * CHUNKS_PER_QUERY
DELETED = 2


@dataclass(frozen=True)
class Index:
    chroma: str
    embedder: str


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    data = tmp_path_factory.mktemp("chroma")
    try:
        with chroma_server(data) as url, EmbeddingServer(dimensions=DIMENSIONS) as embedder:
            yield Index(url, embedder.url)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def write_config(directory: Path, index: Index, port: int, model: str) -> Path:
    cases = [{"id": f"q{i}", "query": q, "relevant": [f"doc-{i}"]} for i, q in enumerate(QUERIES)]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "embeddings": {"toy": {"url": index.embedder, "model": model, "retries": 0}},
        "targets": {
            "docs": {
                "preset": "chroma",
                "url": index.chroma,
                "collection": "docs",
                "embedding": "toy",
                "id": "metadata.doc_id",
                "retries": 0,
            }
        },
        "suites": {"core": {"cases": "core.yaml", "targets": ["docs"], "every": "1s", "k": [1, 3]}},
    }
    path = directory / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    return path


def cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip()]


def diff_changes(daemon: DaemonProcess) -> list[dict[str, Any]] | None:
    found = daemon.get("/api/v1/diff", suite="core", target="docs")
    if found.status_code != 200:  # one run stored so far: nothing to diff yet
        return None
    changes: list[dict[str, Any]] = found.json()["fingerprint_changes"]
    return changes or None


def test_diff_names_the_deleted_documents_then_the_new_model_and_the_baseline_is_flagged(
    index: Index, tmp_path: Path
) -> None:
    collection = create_collection(index.chroma, "docs", QUERIES, DIMENSIONS)
    port = free_port()
    config = write_config(tmp_path, index, port, "toy-1")
    with running(DaemonProcess(config, port, {})) as daemon:
        daemon.wait_runs("core", "docs", 1, 60)  # the first answered run pins itself
        pinned = daemon.get("/api/v1/baselines").json()["baselines"][0]
        assert pinned["config_changes"] == []  # measured under the config in force
        head = daemon.get(f"/api/v1/runs/{pinned['run_id']}").json()["fingerprint"]
        assert head["documents"] == DOCUMENTS
        assert (head["embedding_model"], head["embedding_dimensions"]) == ("toy-1", DIMENSIONS)
        assert head["index_settings"]["hnsw.space"] == "cosine"
        # The relevant chunks of two canaries are deleted: the next runs count fewer records.
        delete_chunks(index.chroma, collection, [f"chunk-{i}-0" for i in range(DELETED)])
        changes = wait_for(lambda: diff_changes(daemon), 60, "a run that counted fewer records")
        assert changes is not None
        assert [c["text"] for c in changes] == [
            f"documents {DOCUMENTS} → {DOCUMENTS - DELETED} (-{DELETED})"
        ]
        shown = lines(
            cli("diff", "--suite", "core", "--target", "docs", "--url", daemon.url).output
        )
        assert shown[1] == f"changed: documents {DOCUMENTS} → {DOCUMENTS - DELETED} (-{DELETED})"

    # The same embedding endpoint under a new model name: the config changed since the pin.
    write_config(tmp_path, index, port, "toy-2")
    shown = lines(cli("baseline", "show", "-c", str(config)).output)
    flagged = next(line for line in shown if pinned["run_id"][:8] in line)
    assert "CHANGED: embedding model toy-1 → toy-2" in " ".join(shown), shown
    assert flagged
    with running(DaemonProcess(config, port, {})) as daemon:
        daemon.wait_runs("core", "docs", 1, 60)
        listed = daemon.get("/api/v1/baselines").json()["baselines"][0]
        assert listed["config_changes"][0]["text"] == "embedding model toy-1 → toy-2"
        newest = daemon.get("/api/v1/runs", suite="core", target="docs", limit=1).json()["runs"]
        page = daemon.get(f"/ui/runs/{newest[0]['run_id']}").text
        assert "was measured under another config" in page
        assert "embedding model toy-1 → toy-2" in page
        for path in ("/ui/", "/ui/baselines"):
            assert "embedding model toy-1 → toy-2" in daemon.get(path).text, path
        diff_page = daemon.get("/ui/diff", suite="core", target="docs").text
        assert "The two runs were made differently" in diff_page
        assert f"documents {DOCUMENTS:,} → {DOCUMENTS - DELETED:,}" in diff_page
    # Stored runs need no daemon: diff from the database, baseline to the newest run.
    shown = lines(cli("diff", "--suite", "core", "--target", "docs", "-c", str(config)).output)
    assert shown[1:3] == [
        "changed: embedding model toy-1 → toy-2",
        f"changed: documents {DOCUMENTS} → {DOCUMENTS - DELETED} (-{DELETED})",
    ]
    assert shown[3].startswith("changed: config ")
