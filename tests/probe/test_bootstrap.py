"""Tests for drafting a suite from live results and reading query files."""

from __future__ import annotations

import re

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from retrievers import FakeRetriever

from ragcanary.errors import ConfigError, UsageError
from ragcanary.measure.cases import Case
from ragcanary.measure.results import Answer, CaseResult
from ragcanary.probe.bootstrap import (
    MAX_SLUG_LENGTH,
    draft_suite,
    read_queries,
    render_draft,
    slugify,
    unique_slugs,
)
from ragcanary.probe.target import HttpTarget
from ragcanary.suites.suite import load_suite

pytestmark = pytest.mark.anyio
SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@pytest.fixture
def anyio_backend():
    return "asyncio"


class ScriptedTarget:
    """Answers each query from a dict; unknown queries time out."""

    name = "scripted"

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    async def search(self, query: str, k: int) -> Answer:
        self.asked.append((query, k))
        return self.answers.get(
            query, Answer((), (), 5.0, "timeout", "no complete answer within 5s")
        )


# --- slugs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("How do I reset my password?", "how-do-i-reset-my-password"),
        ("  Crème brûlée recipe ", "creme-brulee-recipe"),
        ("GPU/CPU: 2x faster!!", "gpu-cpu-2x-faster"),
        ("日本語", "case"),
        ("", "case"),
        ("a" * 60, "a" * MAX_SLUG_LENGTH),
        ("word " * 20, "-".join(["word"] * 9)),
    ],
)
def test_slugify_makes_short_readable_ascii_ids(text, slug):
    """Slugs are lowercase ASCII words joined by dashes, cut at a word boundary."""
    assert slugify(text) == slug


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=15))
def test_unique_slugs_are_unique_well_formed_and_short(texts):
    """Every query gets a distinct, well-formed id of bounded length, in order."""
    slugs = unique_slugs(texts)
    assert len(slugs) == len(texts)
    assert len(set(slugs)) == len(slugs)
    for slug in slugs:
        assert SLUG.fullmatch(slug)
        assert len(slug) <= MAX_SLUG_LENGTH + 4


def test_repeated_slugs_get_numbered_suffixes():
    """Queries that slug alike are told apart by -2, -3 in order."""
    assert unique_slugs(["Reset password", "reset  password!", "RESET PASSWORD"]) == [
        "reset-password",
        "reset-password-2",
        "reset-password-3",
    ]


# --- read_queries -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "queries"),
    [
        # A blank line is kept as "" so that the draft counts it among the skipped.
        ("q.txt", "reset password\n\n  pricing plans  \n", ["reset password", "", "pricing plans"]),
        ("q.txt", "\ufefffirst\r\nsecond\r\n", ["first", "second"]),
        (
            "q.jsonl",
            '{"query": "reset password"}\n\n{"text": "pricing", "id": 3}\n',
            ["reset password", "pricing"],
        ),
    ],
)
def test_read_queries_reads_lines_or_jsonl_fields(tmp_path, name, content, queries):
    """Plain files hold one query a line; .jsonl a query or text field (blank lines no record)."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    assert read_queries(path) == queries


def test_read_queries_names_every_bad_jsonl_line(tmp_path):
    """Each malformed .jsonl line is reported with its line number."""
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "ok"}\nnot json\n{"q": "wrong field"}\n["a"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_queries(path)
    assert [p.line for p in caught.value.problems] == [2, 3, 4]
    assert all(p.file == str(path) for p in caught.value.problems)


@pytest.mark.parametrize("content", [None, "", "\n  \n"])
def test_read_queries_refuses_missing_or_empty_files(tmp_path, content):
    """A missing file or one without queries is a usage error naming the file."""
    path = tmp_path / "queries.txt"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=r"queries\.txt"):
        read_queries(path)


# --- draft_suite --------------------------------------------------------------------------------


async def test_draft_is_loadable_label_free_yaml_with_live_results_as_comments():
    """The draft parses as a suite of label-free cases; live ranks, ids and scores are comments."""
    target = ScriptedTarget(
        {
            "reset password": Answer(("doc-7", "doc-2"), (0.93, 0.8125), 0.01, "ok"),
            "nothing here": Answer((), (), 0.01, "empty"),
        }
    )
    text = await draft_suite(target, ["reset password", "nothing here", "slow one"], depth=5)
    assert target.asked == [("reset password", 5), ("nothing here", 5), ("slow one", 5)]
    loaded = yaml.safe_load(text)
    assert loaded == {
        "cases": [
            {"id": "reset-password", "query": "reset password"},
            {"id": "nothing-here", "query": "nothing here"},
            {"id": "slow-one", "query": "slow one"},
        ]
    }
    assert "#    1. doc-7  0.93\n" in text
    assert "#    2. doc-2  0.8125\n" in text
    assert "# the target returned no results" in text
    assert "# query failed (timeout): no complete answer within 5s" in text
    assert "target scripted" in text


async def test_draft_loads_with_the_suite_loader(tmp_path):
    """Saved as-is, the draft is a valid suite of label-free cases."""
    target = ScriptedTarget({"hello world": Answer(("a", "b"), (0.9, None), 0.1, "ok")})
    path = tmp_path / "draft.yaml"
    path.write_text(await draft_suite(target, ["hello world", "multi\nline"], depth=3))
    suite = load_suite(path)
    assert [(c.id, c.query, c.kind) for c in suite.cases] == [
        ("hello-world", "hello world", "label_free"),
        ("multi-line", "multi\nline", "label_free"),
    ]


async def test_draft_skips_blank_and_repeated_queries():
    """Duplicates are asked once; the header says how many were skipped."""
    target = ScriptedTarget({})
    text = await draft_suite(target, ["a query", "a query", "  ", "another"], depth=3)
    assert [q for q, _ in target.asked] == ["a query", "another"]
    assert len(yaml.safe_load(text)["cases"]) == 2
    assert "# 2 blank or repeated queries were skipped." in text


@settings(max_examples=60, deadline=None)
@given(
    query=st.text(min_size=1, max_size=60).filter(str.strip),
    doc_id=st.text(min_size=1, max_size=20),
    error=st.text(max_size=30),
)
def test_draft_survives_any_query_id_or_error_text(query, doc_id, error):
    """Newlines, quotes and YAML syntax in queries, ids or errors never break the draft."""
    case = Case(id=slugify(query), query=query.strip())
    results = [
        CaseResult(case, Answer((doc_id,), (None,), 0.1, "ok")),
        CaseResult(Case(id="failed", query="x"), Answer((), (), 0.1, "bad_response", error)),
    ]
    loaded = yaml.safe_load(render_draft("t", 3, results))
    assert loaded["cases"] == [
        {"id": case.id, "query": case.query},
        {"id": "failed", "query": "x"},
    ]


async def test_draft_from_a_real_retriever():
    """End to end over HTTP: the draft lists the retriever's live ids in its order."""
    with FakeRetriever() as retriever:
        async with httpx.AsyncClient() as client:
            target = HttpTarget("fake", retriever.target_config(), client)
            text = await draft_suite(target, ["reset password", "pricing plans"], depth=10)
    assert re.search(r"1\. doc-7  0\.93\n.*2\. doc-2  0\.81\n.*3\. doc-9  0\.44\n", text, re.S)
    assert [c["id"] for c in yaml.safe_load(text)["cases"]] == ["reset-password", "pricing-plans"]


async def test_blank_lines_of_a_queries_file_are_counted_among_the_skipped(tmp_path):
    """Read from a file as the CLI does: 2 blank lines and 1 repeat are 3 skipped, not 1."""
    queries = tmp_path / "queries.txt"
    queries.write_text("a query\n\na query\n   \nanother\n", encoding="utf-8")
    target = ScriptedTarget({})
    text = await draft_suite(target, read_queries(queries), depth=3)
    assert [q for q, _ in target.asked] == ["a query", "another"]
    assert "# 3 blank or repeated queries were skipped." in text
