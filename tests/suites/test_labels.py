"""Accepting a judgment writes one label into the suite file: comments, order and quoting kept,
lists widened to grades only when needed, and nothing written when the suite would break."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragcanary.errors import ConfigError, UsageError
from ragcanary.suites.promote import add_label
from ragcanary.suites.suite import load_suite

SUITE = """\
# The core canaries: keep this header.
cases:
  # Questions about storage.
  - id: serverless  # the first canary
    query: "a vector database without a server"
    relevant: [chroma, lancedb]   # both embed in-process
    tags: [dev]
  - id: graded
    query: fast approximate search
    relevant: {faiss: 2, annoy: 1}
  - id: negative
    query: streaming ingest
    relevant: []
    max_score: 0.6
# trailing comment
"""


def write(tmp_path: Path, text: str = SUITE, name: str = "core.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_grade_1_joins_a_list_and_every_comment_stays(tmp_path: Path) -> None:
    path = write(tmp_path)
    add_label(path, "serverless", "duckdb", 1)
    text = path.read_text()
    for comment in (
        "# The core canaries",
        "# Questions about storage.",
        "# the first canary",
        "# both embed in-process",
        "# trailing comment",
    ):
        assert comment in text
    assert 'query: "a vector database without a server"' in text
    assert "relevant: [chroma, lancedb, duckdb]" in text
    assert load_suite(path).by_id["serverless"].relevant == {"chroma": 1, "lancedb": 1, "duckdb": 1}
    # Every other byte as it was; a comment after the longer line keeps one space before it.
    unchanged = text.replace("[chroma, lancedb, duckdb] #", "[chroma, lancedb]   #")
    assert unchanged == SUITE


def test_another_grade_turns_the_list_into_grades_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path)
    add_label(path, "serverless", "pgvector", 0)
    assert "relevant: {chroma: 1, lancedb: 1, pgvector: 0}" in path.read_text()
    add_label(path, "graded", "hnswlib", 3)
    assert load_suite(path).by_id["graded"].relevant == {"faiss": 2, "annoy": 1, "hnswlib": 3}
    assert "# both embed in-process" in path.read_text()


def test_a_label_already_there_or_a_case_gone_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path)
    with pytest.raises(UsageError, match="labels 'chroma' already"):
        add_label(path, "serverless", "chroma", 2)
    with pytest.raises(UsageError, match="no case 'renamed'"):
        add_label(path, "renamed", "x", 1)
    assert path.read_text() == SUITE


def test_a_label_that_breaks_the_suite_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    text = SUITE.replace("    relevant: []\n    max_score: 0.6\n", "    relevant: []\n")
    text = text.replace("  - id: negative", "  - id: free\n    query: no labels\n  - id: negative")
    path = write(tmp_path, SUITE + "  - id: free\n    query: label free\n")
    before = path.read_text()
    with pytest.raises(ConfigError):  # a grade 0 alone makes it a negative canary: max_score
        add_label(path, "free", "x", 0)
    assert path.read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_json_and_jsonl_suites_take_a_label(tmp_path: Path) -> None:
    data = {"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}
    as_json = write(tmp_path, json.dumps(data), "s.json")
    add_label(as_json, "a", "y", 2)
    assert load_suite(as_json).by_id["a"].relevant == {"x": 1, "y": 2}
    lines = [
        {"id": "a", "query": "q", "relevant": ["x"]},
        {"id": "b", "query": "r", "relevant": ["z"]},
    ]
    as_jsonl = write(tmp_path, "".join(json.dumps(line) + "\n" for line in lines), "s.jsonl")
    add_label(as_jsonl, "b", "w", 1)
    assert load_suite(as_jsonl).by_id["b"].relevant == {"z": 1, "w": 1}
    assert as_jsonl.read_text().splitlines()[0] == json.dumps(lines[0])
