"""The chroma preset against a real Chroma server (`chroma run`), queried by `ragcanary run`.

The server comes from its own virtualenv (`make test` builds `.venv-chroma`); the canary
queries are embedded by a deterministic OpenAI-compatible endpoint on 127.0.0.1, and the
collection holds the same vectors, so each query's nearest document is known.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytrec_eval
import yaml
from chroma_server import API, chroma_server, create_collection, delete_chunks
from retrievers import EmbeddingServer, toy_vector
from server_process import free_port
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target

DIMENSIONS = 8
QUERIES = [f"how do I configure feature {i}" for i in range(10)]


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server on 127.0.0.1 with an empty data directory; its base URL."""
    data = tmp_path_factory.mktemp("chroma")
    try:
        with chroma_server(data) as url:
            yield url
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _collection(chroma: str, name: str) -> str:
    """A new cosine collection: per query its relevant chunk and three others; its id."""
    return create_collection(chroma, name, QUERIES, DIMENSIONS)


def _config(tmp_path: Path, chroma: str, embedder: str, collection: str) -> Path:
    suite = {
        "cases": [
            {"id": f"q{i}", "query": q, "relevant": [f"doc-{i}"]} for i, q in enumerate(QUERIES)
        ]
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    config = {
        "embeddings": {"toy": {"url": embedder, "model": "toy-1", "retries": 0}},
        "targets": {
            "kb": {
                "preset": "chroma",
                "url": chroma,
                "collection": collection,
                "embedding": "toy",
                "id": "metadata.doc_id",
                "retries": 0,
            }
        },
        "suites": {"core": {"cases": "suite.yaml", "targets": ["kb"], "k": [1, 3], "depth": 3}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _run(config: Path, report: Path, *extra: str) -> Any:
    args = ["run", "-c", str(config), "--report", str(report), *extra]
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def test_run_equals_trec_eval_on_what_chroma_returns_and_a_deletion_fails_it(
    chroma: str, tmp_path: Path
) -> None:
    collection = _collection(chroma, "docs")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, chroma, embedder.url, "docs")
        baseline = tmp_path / "baseline.json"
        result = _run(config, baseline)
        assert result.exit_code == 0, result.output
        report = json.loads(baseline.read_text())

        # Ask Chroma itself for the same vectors: the report must score exactly those ids.
        run: dict[str, dict[str, float]] = {}
        for i, query in enumerate(QUERIES):
            answer = httpx.post(
                f"{chroma}{API}/{collection}/query",
                json={
                    "query_embeddings": [toy_vector(query, DIMENSIONS)],
                    "n_results": 3,
                    "include": ["distances", "metadatas"],
                },
            ).json()
            docs = [m["doc_id"] for m in answer["metadatas"][0]]
            case = report["cases"][i]
            assert case["ids"] == docs
            assert case["scores"] == pytest.approx(answer["distances"][0], abs=1e-6)
            assert case["scores"] == sorted(case["scores"])  # distances, nearest first
            run[f"q{i}"] = {doc: float(3 - rank) for rank, doc in enumerate(docs)}
        qrels = {f"q{i}": {f"doc-{i}": 1} for i in range(len(QUERIES))}
        expected = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success"}).evaluate(run)
        mean_rr = sum(m["recip_rank"] for m in expected.values()) / len(expected)
        assert report["metrics"]["mrr"] == pytest.approx(mean_rr, abs=1e-9)
        assert report["metrics"]["mrr"] == 1.0

        # A fifth of the relevant documents deleted from the collection: a regression.
        gone = [f"chunk-{i}-0" for i in range(2)]
        delete_chunks(chroma, collection, gone)
        after = tmp_path / "after.json"
        result = _run(config, after, "--baseline", str(baseline))
    assert result.exit_code == 1, result.output
    assert json.loads(after.read_text())["metrics"]["hit_rate@3"] == pytest.approx(0.8)


def test_a_missing_collection_names_the_ones_that_exist(chroma: str, tmp_path: Path) -> None:
    _collection(chroma, "handbook")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        report = tmp_path / "report.json"
        result = _run(_config(tmp_path, chroma, embedder.url, "handbok"), report)
    assert result.exit_code == 3, result.output
    error = json.loads(report.read_text())["cases"][0]["error"]
    assert "collection 'handbok' not found in default_tenant/default_database" in error
    assert "set collection: to one of" in error
    assert "handbook" in error


@pytest.mark.parametrize("suffix", ["/api/v2", "/api/v2/", "/api/v1"])
def test_a_url_that_ends_in_the_api_prefix_is_refused_with_the_fix(
    chroma: str, tmp_path: Path, suffix: str
) -> None:
    """Issue 34: the preset adds /api/v2 itself; the doubled prefix made every lookup a 404,
    said as "collection not found". validate, validate --live and run now say what is wrong."""
    name = {"/api/v2": "prefixed", "/api/v2/": "slashed", "/api/v1": "older"}[suffix]
    _collection(chroma, name)
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, chroma + suffix, embedder.url, name)
        line = config.read_text().splitlines().index(f"    url: {chroma}{suffix}") + 1
        results = [
            CliRunner().invoke(app, ["validate", "-c", str(config)]),
            _validate_live(config),
            _run(config, tmp_path / "report.json"),
        ]
    for result in results:
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        adds = "which the chroma preset adds" if "v2" in suffix else "and the chroma preset adds"
        assert (
            f"targets.kb.url: {chroma + suffix!r} ends in {suffix.rstrip('/')}, {adds} /api/v2 "
            f"itself ({config} line {line}); write url: {chroma}, the server's root"
        ) in said
        assert "not found" not in said


def test_a_url_that_is_not_the_server_s_root_is_said_to_be_one_to_check(
    chroma: str, tmp_path: Path
) -> None:
    """A prefix validate cannot know (a proxy path): the lookup and the list both 404."""
    _collection(chroma, "behind")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        report = tmp_path / "report.json"
        result = _run(_config(tmp_path, chroma + "/chroma", embedder.url, "behind"), report)
    assert result.exit_code == 3, result.output
    error = json.loads(report.read_text())["cases"][0]["error"]
    assert "collection 'behind' not found in default_tenant/default_database" in error
    assert (
        "the list of collections answered HTTP 404 too: check that url: is the server's root"
        in error
    )


def test_a_wrong_dimension_says_both_numbers(chroma: str, tmp_path: Path) -> None:
    _collection(chroma, "eight")
    with EmbeddingServer(dimensions=5) as embedder:
        report = tmp_path / "report.json"
        result = _run(_config(tmp_path, chroma, embedder.url, "eight"), report)
    assert result.exit_code == 3, result.output
    error = json.loads(report.read_text())["cases"][0]["error"]
    assert "dimension of 8, got 5" in error


def test_a_stopped_chroma_is_unavailable(tmp_path: Path) -> None:
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        report = tmp_path / "report.json"
        closed = f"http://127.0.0.1:{free_port()}"
        result = _run(_config(tmp_path, closed, embedder.url, "docs"), report)
    assert result.exit_code == 3, result.output
    assert json.loads(report.read_text())["counts"]["outcomes"]["connect_error"] == len(QUERIES)


def _validate_live(config: Path) -> Any:
    return CliRunner().invoke(
        app, ["validate", "--live", "-c", str(config)], env={"COLUMNS": "300"}
    )


def test_validate_live_shows_the_request_and_the_first_hits(chroma: str, tmp_path: Path) -> None:
    _collection(chroma, "live")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        result = _validate_live(_config(tmp_path, chroma, embedder.url, "live"))
    assert result.exit_code == 0, result.output
    assert "kb: ok (ok," in result.output
    assert f"query: {QUERIES[0]}" in result.output
    assert '"query_embeddings": [[' in result.output
    assert "... 8 numbers" not in result.output  # 8 numbers are shown whole; longer cut
    assert "1. doc-0  " in result.output


def test_validate_live_says_a_wrong_dimension_is_a_config_error(
    chroma: str, tmp_path: Path
) -> None:
    _collection(chroma, "dims")
    with EmbeddingServer(dimensions=12) as embedder:
        result = _validate_live(_config(tmp_path, chroma, embedder.url, "dims"))
    assert result.exit_code == 2, result.output
    assert "dimension of 8, got 12" in result.output
    assert "... 12 numbers" in result.output


def test_validate_live_exits_3_when_chroma_is_down(tmp_path: Path) -> None:
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        closed = f"http://127.0.0.1:{free_port()}"
        result = _validate_live(_config(tmp_path, closed, embedder.url, "docs"))
    assert result.exit_code == 3, result.output
    assert "kb: unreachable (connect_error" in result.output


def test_a_deleted_document_is_reported_missing(chroma: str, tmp_path: Path) -> None:
    collection = _collection(chroma, "gone")
    with EmbeddingServer(dimensions=DIMENSIONS) as embedder:
        config = _config(tmp_path, chroma, embedder.url, "gone")
        assert "left the index" not in _validate_live(config).output
        delete_chunks(chroma, collection, ["chunk-1-0"])
        result = _validate_live(config)
    assert result.exit_code == 0, result.output  # a ticket, not a config error
    assert result.output.count("left the index") == 1
    assert "  left the index: case q1: doc-1\n" in result.output

    async def missing(id_path: str, ids: list[str]) -> set[str] | None:
        given = {"preset": "chroma", "url": chroma, "collection": "gone", "embedding": "toy"}
        async with httpx.AsyncClient() as client:
            target = make_target("kb", TargetConfig(**given, id=id_path), client)
            return await target.missing(ids)

    # By Chroma's own record ids, and by a metadata field.
    assert asyncio.run(missing("id", ["chunk-0-0", "chunk-1-0", "never"])) == {
        "chunk-1-0",
        "never",
    }
    assert asyncio.run(missing("metadata.doc_id", ["doc-0", "doc-1", "doc-0-other-1"])) == {"doc-1"}
