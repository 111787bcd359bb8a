"""`ragcanary import beir|trec` and `ragcanary bootstrap` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result
from retrievers import DEFAULT_API_KEY, EmbeddingServer, FakeRetriever, toy_vector
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.suites.suite import load_suite


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "KEY": DEFAULT_API_KEY})


def test_import_beir_writes_a_loadable_suite(tmp_path: Path) -> None:
    beir = tmp_path / "scifact"
    (beir / "qrels").mkdir(parents=True)
    queries = [{"_id": "q1", "text": "does aspirin help"}, {"_id": "q2", "text": "unjudged"}]
    (beir / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n")
    out = tmp_path / "suite.yaml"
    result = _invoke("import", "beir", str(beir), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "wrote 1 cases" in result.output
    (case,) = load_suite(out).cases
    assert (case.id, case.query, dict(case.relevant or {})) == (
        "q1",
        "does aspirin help",
        {"d1": 1, "d2": 2},
    )


def test_import_trec_reports_a_bad_qrels_line_with_its_location(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("301 0 DOC-1 1\n301 0 DOC-2 high\n")
    topics = tmp_path / "topics.tsv"
    topics.write_text("301\tinternational organized crime\n")
    result = _invoke("import", "trec", str(qrels), str(topics), "-o", str(tmp_path / "s.yaml"))
    assert result.exit_code == 2
    assert "qrels.txt line 2" in result.output


def test_bootstrap_drafts_a_suite_from_live_answers(tmp_path: Path) -> None:
    with FakeRetriever() as retriever:
        config = tmp_path / "ragcanary.yaml"
        config.write_text(
            "targets:\n  vendor:\n"
            f"    url: {retriever.url}\n"
            '    headers: {X-Api-Key: "${KEY}"}\n'
            '    body: {text: "{query}", top_k: "{k}"}\n'
            "    results: data.matches\n    id: chunk.meta.parent_id\n    score: relevance\n"
        )
        queries = tmp_path / "queries.txt"
        queries.write_text("reset password\npricing plans\n")
        out = tmp_path / "draft.yaml"
        result = _invoke(
            "bootstrap",
            "-c",
            str(config),
            "--target",
            "vendor",
            "--queries",
            str(queries),
            "--out",
            str(out),
        )
    assert result.exit_code == 0, result.output
    draft = out.read_text()
    assert "doc-7" in draft
    assert DEFAULT_API_KEY not in draft
    assert [c.query for c in load_suite(out).cases] == ["reset password", "pricing plans"]


def test_bootstrap_embeds_the_queries_of_a_target_that_searches_by_vector(
    tmp_path: Path,
) -> None:
    """A target with embedding: gets each query's vector, as in a run."""
    with FakeRetriever() as retriever, EmbeddingServer() as embedder:
        config = tmp_path / "ragcanary.yaml"
        config.write_text(
            f"embeddings:\n  toy: {{url: {embedder.url}, model: toy-1}}\n"
            "targets:\n  vendor:\n"
            f"    url: {retriever.url}\n"
            '    headers: {X-Api-Key: "${KEY}"}\n'
            '    body: {text: "{query}", top_k: "{k}", vector: "{vector}"}\n'
            "    results: data.matches\n    id: chunk.meta.parent_id\n    score: relevance\n"
            "    embedding: toy\n"
        )
        queries = tmp_path / "queries.txt"
        queries.write_text("reset password\n")
        out = tmp_path / "draft.yaml"
        args = ["bootstrap", "-c", str(config), "--target", "vendor"]
        result = _invoke(*args, "--queries", str(queries), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [r.body["vector"] for r in retriever.requests] == [toy_vector("reset password", 8)]
    assert "doc-7" in out.read_text()
