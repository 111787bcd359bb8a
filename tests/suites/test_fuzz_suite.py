"""Fuzzing suite files and imported collections: any input loads or fails with a located error."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragcanary.errors import ConfigError
from ragcanary.measure.cases import Suite
from ragcanary.suites.importers import Imported, read_beir, read_trec
from ragcanary.suites.suite import dump_suite, load_suite

FIELDS = ["id", "query", "relevant", "tags", "weight", "min_score", "max_score"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=10),
    st.sampled_from(["", " ", "doc-1", "42", "nan", "{query}", "\u2028", "a\nb"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4) | st.integers(-1, 3), inner)
    ),
    max_leaves=6,
)
# Mostly case-shaped mappings, so the checks of each field get exercised, not only the outer ones.
cases = st.lists(
    st.dictionaries(st.sampled_from([*FIELDS, "extra"]), values, max_size=6) | values, max_size=4
)
documents = st.one_of(cases, st.fixed_dictionaries({"cases": cases}), values)
SUFFIXES = [".yaml", ".json", ".jsonl"]
FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


def load(workdir: Path, suffix: str, content: bytes) -> Suite | ConfigError:
    """What load_suite makes of ``content``; any exception but ConfigError fails the test."""
    path = workdir / f"suite{suffix}"
    path.write_bytes(content)
    try:
        suite = load_suite(path)
    except ConfigError as exc:
        assert_located(exc, str(path), unlocated_ok=suffix == ".json" or not content.strip())
        return exc
    assert_valid(suite)
    return suite


def assert_located(exc: ConfigError, file: str, unlocated_ok: bool) -> None:
    """Every problem names the file, what is wrong and the fix; one at a path has its line.

    Only a blank file, or a JSON file that YAML cannot read for line numbers, may leave
    a path without a line.
    """
    assert exc.problems, "a ConfigError without problems"
    for problem in exc.problems:
        assert problem.file == file, problem
        assert problem.message, problem
        assert problem.fix, problem
        if problem.path and not unlocated_ok:
            assert problem.line is not None, problem


def assert_valid(suite: Suite) -> None:
    """What the runner relies on: unique non-empty ids, query text, sane weights and grades."""
    assert len(suite.by_id) == len(suite.cases)
    for case in suite.cases:
        assert case.id.strip()
        assert isinstance(case.query, str)
        assert case.query.strip()
        assert math.isfinite(case.weight)
        assert case.weight > 0
        assert all(isinstance(tag, str) for tag in case.tags)
        for grade in (case.relevant or {}).values():
            assert isinstance(grade, int)
            assert not isinstance(grade, bool)
            assert grade >= 0


def render(document: Any, suffix: str) -> bytes:
    if suffix == ".yaml":
        return yaml.safe_dump(document, allow_unicode=True).encode()
    if suffix == ".json":
        return json.dumps(document, indent=1).encode()
    rows = document if isinstance(document, list) else [document]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@FUZZ
@given(suffix=st.sampled_from(SUFFIXES), content=st.binary(max_size=200))
def test_any_bytes_load_or_fail_located(workdir: Path, suffix: str, content: bytes) -> None:
    """Random bytes in any suite format give cases or a ConfigError naming the file."""
    load(workdir, suffix, content)


@FUZZ
@given(suffix=st.sampled_from(SUFFIXES), document=documents)
def test_any_structure_loads_or_fails_located(workdir: Path, suffix: str, document: Any) -> None:
    """Cases with fields of any type and value load valid, or every mistake is located."""
    load(workdir, suffix, render(document, suffix))


def assert_imported_suite_loads(workdir: Path, imported: Imported) -> None:
    """What an import writes must pass the suite loader it is written for."""
    if imported.cases:
        path = workdir / "imported.yaml"
        dump_suite(imported.cases, path)
        assert_valid(load_suite(path))


def assert_located_import_error(exc: ConfigError) -> None:
    assert exc.problems, "a ConfigError without problems"
    for problem in exc.problems:
        assert problem.file, problem
        assert problem.message, problem
        assert problem.fix, problem


# Text a UTF-8 file can hold: no lone surrogates.
field_text = st.text(
    st.characters(exclude_characters="\t\n\r", exclude_categories=["Cs"]), max_size=6
) | st.sampled_from(["q1", "d1", "1", "0", "-1", "2.5", " ", ""])
tsv_lines = st.lists(st.lists(field_text, min_size=1, max_size=5).map("\t".join), max_size=5)
trec_lines = st.lists(st.lists(field_text, min_size=1, max_size=5).map(" ".join), max_size=5)
beir_queries = st.lists(
    st.fixed_dictionaries({}, optional={"_id": field_text | values, "text": field_text | values})
    | values,
    max_size=4,
)


@FUZZ
@given(qrels=trec_lines, topics=tsv_lines | st.text(max_size=120))
def test_any_trec_qrels_and_topics_import_or_fail_located(
    workdir: Path, qrels: list[str], topics: str | list[str]
) -> None:
    """TREC qrels and topics (SGML or TSV) of any content give a loadable suite or an error."""
    qrels_path, topics_path = workdir / "qrels.txt", workdir / "topics.txt"
    qrels_path.write_text("\n".join(["1 0 d1 1", *qrels]), encoding="utf-8")
    lines = topics if isinstance(topics, list) else [topics]
    topics_path.write_text("\n".join(["1\tfirst query", *lines]), encoding="utf-8")
    try:
        imported = read_trec(qrels_path, topics_path)
    except ConfigError as exc:
        assert_located_import_error(exc)
    else:
        assert_imported_suite_loads(workdir, imported)


@FUZZ
@given(queries=beir_queries, qrels=tsv_lines)
def test_any_beir_directory_imports_or_fails_located(
    workdir: Path, queries: list[Any], qrels: list[str]
) -> None:
    """A BEIR queries.jsonl and qrels/test.tsv of any content give a loadable suite or an error."""
    (workdir / "qrels").mkdir(exist_ok=True)
    rows = [{"_id": "q1", "text": "first query"}, *queries]
    (workdir / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (workdir / "qrels" / "test.tsv").write_text(
        "\n".join(["query-id\tcorpus-id\tscore", "q1\td1\t1", *qrels]), encoding="utf-8"
    )
    try:
        imported = read_beir(workdir)
    except ConfigError as exc:
        assert_located_import_error(exc)
    else:
        assert_imported_suite_loads(workdir, imported)
