"""`ragcanary run` says why queries failed: a count and the first error of each kind."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-run-output-77a"
QUERIES = [f"question {i:02d}" for i in range(16)]


def test_sixteen_failures_of_one_kind_are_one_line_with_the_first_error(tmp_path: Path) -> None:
    cases = [
        {"id": f"c{i:02d}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (tmp_path / "suite.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        retriever.status = 503
        config = {
            "storage": f"sqlite:///{tmp_path / 'r.db'}",
            "targets": {"vendor": target_entry(retriever.url, retries=0)},
            "suites": {"core": {"cases": "suite.json", "targets": ["vendor"]}},
        }
        (tmp_path / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        result = CliRunner().invoke(
            app, ["run", "-c", str(tmp_path / "ragcanary.yaml")], env={"VENDOR_KEY": API_KEY}
        )
    assert result.exit_code == 3
    lines = [line for line in result.stderr.splitlines() if "http_5xx" in line]
    assert len(lines) == 1, result.stderr
    assert "http_5xx: 16 queries, first (c00): HTTP 503" in lines[0]
    assert "16 of 16 queries unanswered (coverage 0%)" in result.stderr
