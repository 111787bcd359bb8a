"""YAML and JSON loading that knows the line of every key, and problems located with it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.yamlfile import (
    ALIAS_FIX,
    MAX_FILE_BYTES,
    Document,
    dotted,
    line_of,
    load_json,
    load_yaml,
    read_text,
)
from ragcanary.errors import ConfigError, Problem

CONFIG = """\
storage: sqlite:///x.db
targets:
  docs:
    url: http://h/search
    body: {q: "{query}", limit: 10}
suites:
  core:
    k:
      - 1
      - 5
    thresholds:
      hit_rate: {5: 0.8}
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ((), 1),
        (("storage",), 1),
        (("targets",), 2),
        (("targets", "docs"), 3),
        (("targets", "docs", "url"), 4),
        (("targets", "docs", "body", "q"), 5),
        (("suites", "core", "k"), 8),
        (("suites", "core", "k", 0), 9),
        (("suites", "core", "k", 1), 10),
        (("suites", "core", "thresholds", "hit_rate", 5), 12),
    ],
)
def test_every_key_and_item_maps_to_its_line(path: tuple[str | int, ...], line: int) -> None:
    """Keys map to their own line (not their value's), items to theirs, ints keys stay ints."""
    _, lines = load_yaml(CONFIG, "ragcanary.yaml")
    assert lines[path] == line


def test_data_is_what_safe_load_gives() -> None:
    """The data is exactly yaml.safe_load's, YAML 1.1 quirks included."""
    text = CONFIG + "flags: [yes, off, 1e5, 0x10, 2024-01-02]\n"
    data, _ = load_yaml(text, "f.yaml")
    assert data == yaml.safe_load(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(min_size=1, max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(node: Any, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if not isinstance(node, dict | list):
        return [at]
    pairs = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    return [at] + [p for key, child in pairs for p in _paths(child, (*at, key))]


@settings(max_examples=60)
@given(data=json_values)
def test_any_document_round_trips_with_a_line_for_every_path(data: Any) -> None:
    """Whatever safe_dump writes loads back equal, with a line for every key and item."""
    for text, load in ((yaml.safe_dump(data), load_yaml), (json.dumps(data, indent=1), load_json)):
        loaded, lines = load(text, "f")
        assert loaded == data
        assert all(1 <= lines[p] <= text.count("\n") + 1 for p in _paths(data))


BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
)


def test_alias_bomb_is_refused_before_anything_is_expanded() -> None:
    """Billion laughs (10**9 strings once expanded) is refused at its first anchor, at once."""
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_yaml(BILLION_LAUGHS, "bomb.yaml")
    assert time.monotonic() - started < 1.0
    first = caught.value.problems[0]
    assert (first.file, first.line, first.message) == (
        "bomb.yaml",
        1,
        "YAML anchor &a is not allowed",
    )
    assert first.fix == ALIAS_FIX == "write the value out; aliases are not allowed"
    # One problem per anchor or alias and line, the rest counted in the last one shown.
    assert len(caught.value.problems) == 10
    assert "more anchors or aliases" in caught.value.problems[-1].message


def test_merge_key_is_refused_for_the_alias_it_needs() -> None:
    """``<<: *base`` needs an alias, so it is refused too, at the anchor and the alias."""
    text = "base: &b\n  x: 1\nc:\n  <<: *b\n  y: 3\n"
    with pytest.raises(ConfigError) as caught:
        load_yaml(text, "f.yaml")
    found = [(p.line, p.message) for p in caught.value.problems]
    assert found == [(1, "YAML anchor &b is not allowed"), (4, "YAML alias *b is not allowed")]


def test_a_large_file_of_aliases_is_refused_in_seconds() -> None:
    """Aliases are found from the parser's events, before any node is built."""
    text = "a: &a 1\nb: [" + "*a, " * 1_000_000 + "]\n"  # 4 MB
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_yaml(text, "f.yaml")
    assert time.monotonic() - started < 5
    assert [p.line for p in caught.value.problems] == [1, 2]


def test_recursive_alias_is_refused_without_hanging() -> None:
    """A self-referencing alias is an alias like any other."""
    with pytest.raises(ConfigError, match="anchor &x is not allowed"):
        load_yaml("a: &x\n  - *x\n", "f.yaml")


def test_duplicate_keys_go_to_the_callers_problems_when_it_collects_them() -> None:
    """With a problems list the data still loads, so model problems can be reported beside."""
    problems: list[Problem] = []
    data, _ = load_yaml("a: 1\nb: 2\na: 3\n", "f.yaml", problems)
    assert data == {"a": 3, "b": 2}
    assert [(p.line, p.message) for p in problems] == [(3, "key 'a' appears twice (lines 1 and 3)")]
    problems = []
    load_json('{"a": 1,\n "a": 2}', "f.json", problems)
    assert [p.line for p in problems] == [2]


@pytest.mark.parametrize(
    "text", ["[" * 100_000, "a:\n" + "".join("  " * i + "- \n" for i in range(3000))]
)
def test_nesting_too_deep_is_a_located_problem(text: str) -> None:
    """A document nested past what Python can recurse into is refused, not a crash."""
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_yaml(text, "f.yaml")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_json("[" * 100_000 + "]" * 100_000, "f.json")


def test_a_file_over_the_limit_is_refused_without_being_read(tmp_path: Path) -> None:
    """A 60 MB file is refused from its size alone, in far less time than reading it takes."""
    path = tmp_path / "big.yaml"
    with path.open("wb") as handle:
        handle.truncate(60_000_000)  # sparse: no time is spent writing it either
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        read_text(path, "big.yaml", "unused")
    assert time.monotonic() - started < 1.0
    [problem] = caught.value.problems
    assert problem.file == "big.yaml"
    assert problem.message == "the file is 60.0 MB; config and suite files may have at most 10 MB"
    assert MAX_FILE_BYTES == 10_000_000


def test_a_file_at_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    """The cap is exact: ``limit`` bytes pass, ``limit + 1`` do not."""
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a" * 100)
    assert read_text(path, "f.yaml", "unused", limit=100) == "a" * 100
    with pytest.raises(ConfigError, match="at most"):
        read_text(path, "f.yaml", "unused", limit=99)


@pytest.mark.parametrize(
    ("text", "line", "message", "fix"),
    [
        ("a: 1\n  b: 2\n", 2, "mapping values are not allowed here", "indentation"),
        ("a:\n\t- 1\n", 2, "found character '\\t'", "indent with spaces"),
        ("a: [1\nb: 2\n", 2, "flow sequence that starts at line 1", "indentation"),
        ('a: "open\n', 2, "found unexpected end of stream", "quotes"),
        ("a: 1\n---\nb: 2\n", 2, "but found another document", "one document per file"),
        ("a: !!python/object:os.system x\n", 1, "could not determine a constructor", "!tag"),
        ("a: 1\nb: \x07\n", 2, "unacceptable character #x0007", "control character"),
    ],
)
def test_syntax_error_is_one_problem_at_its_line(
    text: str, line: int, message: str, fix: str
) -> None:
    """A YAML syntax error becomes exactly one located problem with a fix."""
    with pytest.raises(ConfigError) as caught:
        load_yaml(text, "bad.yaml")
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == ("bad.yaml", line)
    assert message in problem.message
    assert fix in problem.fix


def test_duplicate_keys_are_problems_naming_both_lines() -> None:
    """A key written twice in one mapping is reported, not silently overwritten."""
    text = "a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\na: 4\n"
    with pytest.raises(ConfigError) as caught:
        load_yaml(text, "f.yaml")
    assert [(p.line, p.message) for p in caught.value.problems] == [
        (5, "key 'c' appears twice (lines 3 and 5)"),
        (6, "key 'a' appears twice (lines 1 and 6)"),
    ]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_document_is_none(text: str) -> None:
    """An empty file loads as None, like safe_load."""
    assert load_yaml(text, "f.yaml")[0] is None


def test_json_values_come_from_json_and_lines_from_yaml() -> None:
    """Exponents and surrogate pairs read as JSON means them; tab indentation still has lines."""
    text = '{\n\t"a": 1e5,\n\t"b": ["\\ud83d\\ude00",\n\t\t2]\n}'
    data, lines = load_json(text, "s.json")
    assert data == {"a": 100000.0, "b": ["\U0001f600", 2]}
    assert (lines["a",], lines["b", 0], lines["b", 1]) == (2, 3, 4)


def test_invalid_json_is_one_problem_at_its_line() -> None:
    """A JSON syntax error is located on the line json reports."""
    with pytest.raises(ConfigError) as caught:
        load_json('{"a": 1,\n "b": }', "s.json")
    [problem] = caught.value.problems
    assert (problem.line, problem.message) == (2, "not valid JSON: Expecting value")


def test_json_duplicate_keys_are_problems() -> None:
    """JSON keeps the last duplicate silently; we say so instead."""
    with pytest.raises(ConfigError) as caught:
        load_json('{"a": 1,\n "a": 2}', "s.json")
    assert [p.line for p in caught.value.problems] == [2]


@pytest.mark.parametrize(
    ("path", "data", "shown"),
    [
        (("cases", 3, "query"), {"cases": [{}, {}, {}, {}]}, "cases[3].query"),
        (("suites", "core", "thresholds", "hit_rate", 5), {}, "suites.core.thresholds.hit_rate.5"),
        (
            ("suites", "core", "targets", 0),
            {"suites": {"core": {"targets": ["a"]}}},
            "suites.core.targets[0]",
        ),
        (("k", 0), {"k": {0: 1}}, "k.0"),
        ((), {}, ""),
    ],
)
def test_dotted_renders_list_indexes_in_brackets(
    path: tuple[str | int, ...], data: Any, shown: str
) -> None:
    """List indexes read ``[3]``; mapping keys, int or not, read ``.5``."""
    assert dotted(path, data) == shown


def test_line_of_a_missing_key_is_its_parents() -> None:
    """A field that is not written is located at the nearest thing that is."""
    _, lines = load_yaml(CONFIG, "ragcanary.yaml")
    assert line_of(lines, ("targets", "docs", "timeout")) == 3
    assert line_of({}, ("a",)) is None


def test_document_problem_carries_path_and_line() -> None:
    """A Document builds problems located in its own file."""
    data, lines = load_yaml(CONFIG, "ragcanary.yaml")
    problem = Document("ragcanary.yaml", data, lines).problem(
        ("suites", "core", "k", 1), "bad", "fix"
    )
    assert str(problem) == "suites.core.k[1]: bad (ragcanary.yaml line 10); fix."


def test_read_text_strips_a_bom(tmp_path: Path) -> None:
    """Editors that write a UTF-8 BOM do not break the first key."""
    path = tmp_path / "f.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_text(path, "f.yaml", "create it") == "a: 1\n"


@pytest.mark.parametrize(
    ("make", "message", "fix"),
    [
        (lambda p: None, "file not found", "create it"),
        (lambda p: p.mkdir(), "is a directory", "name the file"),
        (lambda p: p.write_bytes(b"a: \xff\n"), "is not UTF-8 text", "save it as UTF-8"),
    ],
)
def test_unreadable_file_is_one_problem(tmp_path: Path, make: Any, message: str, fix: str) -> None:
    """Missing, directory and non-UTF-8 files are problems naming the file, not tracebacks."""
    path = tmp_path / "f.yaml"
    make(path)
    with pytest.raises(ConfigError) as caught:
        read_text(path, "f.yaml", "create it")
    [problem] = caught.value.problems
    assert problem.file == "f.yaml"
    assert message in problem.message
    assert fix in problem.fix
