"""Suite files in YAML, JSON and JSONL: loading with located problems, and writing them back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragcanary.errors import ConfigError, UsageError
from ragcanary.measure.cases import Case, Suite
from ragcanary.suites.suite import dump_suite, load_suite

CONTRACT_EXAMPLE = """\
cases:
  - id: serverless-vector-db
    query: a vector database that does not need a separate server to run
    relevant: [chroma]
    tags: [negation, dev]
    weight: 1.0
    min_score: 0.5
  - id: streaming-ingest
    query: Does DataForge support real-time streaming ingestion?
    relevant: []
    max_score: 0.6
  - id: pricing-page
    query: how much does the team plan cost
  - id: graded
    query: graded judgements
    relevant: {a: 3, 42: 1, c: 0}
"""


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_contract_example_loads_every_kind_of_case(tmp_path: Path) -> None:
    """Every kind of case docs/suites.md describes loads: labelled, negative, label-free, grades."""
    path = write(tmp_path, CONTRACT_EXAMPLE)
    suite = load_suite(path)
    assert suite.source == path
    assert [c.kind for c in suite.cases] == ["labelled", "negative", "label_free", "labelled"]
    first, negative, label_free, graded = suite.cases
    assert first == Case(
        "serverless-vector-db",
        "a vector database that does not need a separate server to run",
        {"chroma": 1},
        ("negation", "dev"),
        1.0,
        0.5,
    )
    assert (negative.relevant, negative.max_score) == ({}, 0.6)
    assert label_free.relevant is None
    assert graded.relevant == {"a": 3, "42": 1, "c": 0}
    assert suite.by_id["pricing-page"] is label_free


def test_bare_list_of_cases_is_accepted(tmp_path: Path) -> None:
    """A file that is just the list of cases loads like one under ``cases:``."""
    path = write(tmp_path, "- {id: 1, query: q}\n- {id: b, query: r}\n")
    assert [c.id for c in load_suite(path).cases] == ["1", "b"]


def _problems(path: Path, display_name: str | None = None) -> list[tuple[str, str, int | None]]:
    with pytest.raises(ConfigError) as caught:
        load_suite(path, display_name)
    return [(p.path, p.message, p.line) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("case_yaml", "path", "line", "fix"),
    [
        ("- {query: q}", "cases[1].id", 4, "add id:"),
        ("- {id: '', query: q}", "cases[1].id", 4, "add id:"),
        ("- {id: [x], query: q}", "cases[1].id", 4, "add id:"),
        ("- {id: b}", "cases[1].query", 4, "add query:"),
        ("- {id: b, query: '   '}", "cases[1].query", 4, "add query:"),
        ("- {id: a, query: again}", "cases[1].id", 4, "unique id"),
        ("- just a string", "cases[1]", 4, "as a mapping"),
        ("- {id: b, query: q, relevant: []}", "cases[1].max_score", 4, "add max_score:"),
        ("- {id: b, query: q, relevant: {x: 0}}", "cases[1].max_score", 4, "add max_score:"),
    ],
)
def test_each_mistake_in_a_case_is_located_with_a_fix(
    tmp_path: Path, case_yaml: str, path: str, line: int, fix: str
) -> None:
    """Every kind of case mistake names the case's field path, its line and what to write."""
    text = "cases:\n  - id: a\n    query: first\n  " + case_yaml + "\n"
    with pytest.raises(ConfigError) as caught:
        load_suite(write(tmp_path, text))
    [problem] = caught.value.problems
    assert (problem.file, problem.path, problem.line) == (str(tmp_path / "suite.yaml"), path, line)
    assert fix in problem.fix


@pytest.mark.parametrize(
    ("field_yaml", "path", "fix"),
    [
        ("relevent: [x]", "cases[1].relevent", "did you mean 'relevant'?"),
        ("colour: red", "cases[1].colour", "known: id, query"),
        ("relevant: {x: -1}", "cases[1].relevant.x", "whole-number grade"),
        ("relevant: {x: 1.5}", "cases[1].relevant.x", "whole-number grade"),
        ("relevant: {x: yes}", "cases[1].relevant.x", "whole-number grade"),
        ("relevant: [x, {y: 1}]", "cases[1].relevant[1]", "ids as text"),
        ("relevant: x", "cases[1].relevant", "a list of ids"),
        ("tags: dev", "cases[1].tags", "tags: [topic"),
        ("tags: [dev, [x]]", "cases[1].tags[1]", "tags as text"),
        ("weight: 0", "cases[1].weight", "above 0"),
        ("weight: heavy", "cases[1].weight", "a number"),
        ("min_score: .nan", "cases[1].min_score", "a number"),
        ("max_score: true", "cases[1].max_score", "a number"),
    ],
)
def test_each_mistake_in_a_field_is_located_on_its_line(
    tmp_path: Path, field_yaml: str, path: str, fix: str
) -> None:
    """A wrong field of the second case is reported at that field's own line."""
    text = "cases:\n  - id: a\n    query: first\n  - id: b\n    query: q\n    " + field_yaml + "\n"
    with pytest.raises(ConfigError) as caught:
        load_suite(write(tmp_path, text))
    [problem] = caught.value.problems
    assert (problem.path, problem.line) == (path, 6)
    assert fix in problem.fix


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    """The second use of an id is reported with the line of the first."""
    text = "cases:\n  - {id: a, query: q}\n  - {id: b, query: q}\n  - {id: a, query: q}\n"
    assert _problems(write(tmp_path, text)) == [
        ("cases[2].id", "id 'a' is used twice (lines 2 and 4)", 4)
    ]


def test_every_problem_in_the_file_is_reported_in_line_order(tmp_path: Path) -> None:
    """Problems of several cases and fields come out together, top to bottom."""
    text = (
        "cases:\n"
        "  - id: a\n"
        "    query: ''\n"
        "    weight: -1\n"
        "  - id: b\n"
        "    query: q\n"
        "    relevant: {x: -2}\n"
        "    tagz: [t]\n"
    )
    found = _problems(write(tmp_path, text), "suites/core.yaml")
    assert [(path, line) for path, _, line in found] == [
        ("cases[0].query", 3),
        ("cases[0].weight", 4),
        ("cases[1].relevant.x", 7),
        ("cases[1].tagz", 8),
    ]


def test_duplicate_keys_and_case_mistakes_are_reported_together(tmp_path: Path) -> None:
    """A duplicated YAML key no longer hides the model-level problems of the same file."""
    text = (
        "cases:\n"
        "  - id: a\n"
        "    query: q\n"
        "    query: r\n"
        "  - id: b\n"
        "    query: q\n"
        "    relevant: []\n"
        "    min_score: 0.8\n"
        "    max_score: 0.5\n"
    )
    found = _problems(write(tmp_path, text))
    assert [(path, line) for path, _, line in found] == [
        ("cases[0].query", 4),
        ("cases[1].min_score", 8),
    ]
    assert found[0][1] == "key 'query' appears twice (lines 3 and 4)"
    assert "min_score 0.8 is above max_score 0.5" in found[1][1]


def test_a_duplicate_key_in_a_bare_list_of_cases_is_under_cases(tmp_path: Path) -> None:
    """A file that is only a list of cases reports paths as if it had written cases:."""
    [(path, _, line)] = _problems(write(tmp_path, "- id: a\n  query: q\n  id: b\n"))
    assert (path, line) == ("cases[0].id", 3)


def test_a_query_over_10000_characters_is_located(tmp_path: Path) -> None:
    """docs/suites.md's limit on queries: 10,000 characters pass, one more is a located problem."""
    ok = load_suite(write(tmp_path, json.dumps({"cases": [{"id": "a", "query": "q" * 10_000}]})))
    assert len(ok.cases[0].query) == 10_000
    text = "cases:\n  - id: a\n    query: " + "q" * 10_001 + "\n"
    [(path, message, line)] = _problems(write(tmp_path, text))
    assert (path, line) == ("cases[0].query", 3)
    assert "10,001 characters long; at most 10,000 are allowed" in message


def test_a_suite_with_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    """Suite files are held to the same limits as the config: no anchors or aliases."""
    text = "cases:\n  - &c {id: a, query: q}\n  - *c\n"
    found = _problems(write(tmp_path, text))
    assert [(line, message) for _, message, line in found] == [
        (2, "YAML anchor &c is not allowed"),
        (3, "YAML alias *c is not allowed"),
    ]


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        ("", "", "the suite has no cases"),  # no cases: line to point at
        ("cases: []\n", "cases", "the suite has no cases"),
        ("cases:\n", "cases", "the suite has no cases"),
        ("cases: {a: 1}\n", "cases", "expected a list of cases, got a mapping"),
        ("tests: []\n", "tests", "unknown field"),
        ("just text\n", "", "expected a mapping with cases: or a list of cases"),
    ],
)
def test_a_file_without_cases_is_a_problem(
    tmp_path: Path, text: str, path: str, message: str
) -> None:
    """Empty files, empty lists and wrong shapes say that the suite has no cases."""
    assert (path, message) in [(p, m) for p, m, _ in _problems(write(tmp_path, text))]


def test_problems_name_the_file_as_given(tmp_path: Path) -> None:
    """display_name is how the user knows the file (e.g. relative to the config)."""
    path = write(tmp_path, "cases: []\n")
    with pytest.raises(ConfigError) as caught:
        load_suite(path, "suites/core.yaml")
    assert caught.value.problems[0].file == "suites/core.yaml"


def test_jsonl_problems_are_on_the_physical_line(tmp_path: Path) -> None:
    """In JSONL, blank lines count: each problem is on the line of its object."""
    text = (
        '{"id": "a", "query": "q"}\n'
        "\n"
        '{"id": "b", "query": "q", "weight": 0}\n'
        '{"id": "c", "query": \n'
        '{"id": "d", "query": "q", "id": "e"}\n'
        '{"id": "a", "query": "q\\u2028still line six"}\n'
    )
    found = _problems(write(tmp_path, text, "suite.jsonl"))
    assert [(path, line) for path, _, line in found] == [
        ("cases[1].weight", 3),
        ("", 4),
        ("", 5),
        ("cases[2].id", 6),
    ]
    assert found[1][1].startswith("not valid JSON")
    assert found[2][1] == "key 'id' appears twice"


def test_json_suite_problems_are_located(tmp_path: Path) -> None:
    """A .json suite gets lines from its text, like YAML."""
    rows = [{"id": "a", "query": "q"}, {"id": "b", "query": "q", "relevant": {"x": "high"}}]
    path = write(tmp_path, json.dumps({"cases": rows}, indent=2), "suite.json")
    assert _problems(path) == [("cases[1].relevant.x", "'high' is not a grade", 11)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"cases": [\n {"id": "a", "query": "q"},\n {"id": "a", "query": "r"}\n]}',
            ("cases[1].id", "id 'a' is used twice (lines 2 and 3)", 3),
        ),
        (
            '{"cases": [\n {"id": "a",\n  "query": "q",\n  "query": "r"}\n]}',
            ("cases[0].query", "key 'query' appears twice (lines 3 and 4)", 4),
        ),
        (
            '[\n {"id": "a", "query": "q"},\n'
            ' {"id": "b", "query": "q",\n  "relevant": {"x": -1}}\n]',
            ("cases[1].relevant.x", "-1 is not a grade", 4),
        ),
    ],
    ids=["duplicate id", "duplicate key", "bare list"],
)
def test_json_suite_problems_found_after_parsing_are_located_too(
    tmp_path: Path, text: str, expected: tuple[str, str, int]
) -> None:
    """A .json suite's lines are looked up only for a problem; they are the same lines."""
    [(path, message, line)] = _problems(write(tmp_path, text, "suite.json"))
    assert (path, line) == (expected[0], expected[2])
    assert message.startswith(expected[1])


def test_unknown_extension_is_a_problem(tmp_path: Path) -> None:
    """Only .yaml, .yml, .json and .jsonl are suite files."""
    assert _problems(write(tmp_path, "cases: []", "suite.txt")) == [
        ("", "unknown suite file format '.txt'", None)
    ]


ids = st.text(min_size=1, max_size=12).filter(str.strip)
cases = st.builds(
    Case,
    id=ids,
    query=st.text(max_size=40).filter(str.strip),
    relevant=st.none() | st.dictionaries(ids, st.integers(0, 3), max_size=4),
    tags=st.lists(ids, max_size=3).map(tuple),
    weight=st.floats(min_value=0.01, max_value=100),
    min_score=st.none() | st.floats(-1e6, 1e6),
    max_score=st.floats(-1e6, 1e6),  # always set: a negative canary needs it
).filter(lambda c: c.min_score is None or c.min_score <= c.max_score)  # else a problem
suites = st.lists(cases, min_size=1, max_size=5, unique_by=lambda c: c.id)


@pytest.mark.parametrize("name", ["suite.yaml", "suite.yml", "suite.json", "suite.jsonl"])
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=suites)
def test_dumped_cases_load_back_equal(tmp_path: Path, name: str, written: list[Case]) -> None:
    """Any valid cases survive dump_suite then load_suite in every format."""
    path = tmp_path / name
    dump_suite(written, path)
    assert load_suite(path).cases == tuple(written)


def test_dump_writes_the_shortest_form(tmp_path: Path) -> None:
    """All-1 grades become a list, defaults are left out, the YAML reads like docs/suites.md."""
    written = [
        Case("a", "q", {"x": 1, "y": 1}, ("t",)),
        Case("n", "r", {}, max_score=0.6),
        Case("g", "s", {"x": 2}, weight=2.0),
        Case("f", "u"),
    ]
    path = tmp_path / "suite.yaml"
    dump_suite(written, path)
    assert path.read_text(encoding="utf-8") == (
        "cases:\n"
        "- id: a\n  query: q\n  relevant: [x, y]\n  tags: [t]\n"
        "- id: n\n  query: r\n  relevant: []\n  max_score: 0.6\n"
        "- id: g\n  query: s\n  relevant: {x: 2}\n  weight: 2.0\n"
        "- id: f\n  query: u\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["suite.yaml"]  # no temp file left


def test_dump_writes_mappings_as_given(tmp_path: Path) -> None:
    """Importers hand over plain mappings; they are written unchanged, tuples as lists."""
    rows = [{"id": "q1", "query": "what", "relevant": {"d1": 2}, "tags": ("beir",)}]
    path = tmp_path / "out" / "suite.jsonl"
    dump_suite(rows, path)
    assert path.read_text(encoding="utf-8") == (
        '{"id": "q1", "query": "what", "relevant": {"d1": 2}, "tags": ["beir"]}\n'
    )
    assert load_suite(path) == Suite((Case("q1", "what", {"d1": 2}, ("beir",)),), path)


def test_dump_to_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    """Writing a format we cannot read back is refused before anything is written."""
    with pytest.raises(UsageError, match=r"\.yaml, \.yml, \.json or \.jsonl"):
        dump_suite([Case("a", "q")], tmp_path / "suite.csv")
    assert list(tmp_path.iterdir()) == []
