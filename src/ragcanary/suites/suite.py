"""Loading suites of canary cases from .yaml, .json and .jsonl files, and writing them back."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ragcanary.config.problems import show, suggest
from ragcanary.config.yamlfile import (
    Document,
    LazyLines,
    LineMap,
    Lines,
    NodePath,
    line_of,
    load_json,
    load_yaml,
    read_text,
)
from ragcanary.errors import ConfigError, Problem, UsageError
from ragcanary.measure.cases import Case, Suite

SUITE_FORMATS = (".yaml", ".yml", ".json", ".jsonl")
_FIELDS = ["id", "query", "relevant", "tags", "weight", "min_score", "max_score"]
_REMOVE_UNKNOWN = f"remove it (known: {', '.join(_FIELDS)})"
MAX_QUERY_CHARS = 10_000  # docs/suites.md, "Limits and checks"
_GRADE_FIX = "write a whole-number grade: 0 judged not relevant, 1 relevant, 2 or more more so"


def load_suite(path: Path, display_name: str | None = None) -> Suite:
    """The cases of the suite file at ``path``, in its order (.yaml, .yml, .json or .jsonl).

    ``display_name`` names the file in problems (default: ``path`` as given). Raises
    ``ConfigError`` listing every problem in the file, each with its line.
    """
    file = display_name or str(path)
    suffix = path.suffix.lower()
    if suffix not in SUITE_FORMATS:
        fix = "name it .yaml, .yml, .json or .jsonl after its format"
        raise ConfigError([Problem(file, "", f"unknown suite file format {suffix!r}", fix)])
    text = read_text(path, file, "create it or correct the path")
    doc, problems = _parse(text, file, suffix)
    cases = _read_cases(doc, problems)
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: p.line or 0))
    return Suite(tuple(cases), source=path)


def dump_suite(cases: Sequence[Mapping[str, Any]] | Sequence[Case], path: Path) -> None:
    """Write ``cases`` to ``path`` in the format its extension names, replacing it atomically.

    ``Case`` objects are written in their shortest form (``relevant`` as a list when
    every grade is 1, defaults left out); mappings are written as given.
    """
    rows = [_Row(_row(case) if isinstance(case, Case) else _plain(case)) for case in cases]
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        text = _yaml(rows, allow_unicode=True)
        if any(char in text for char in _YAML_LINE_BREAKS):
            text = _yaml(rows, allow_unicode=False)  # escaped, or they would read back as breaks
    elif suffix == ".json":
        text = json.dumps({"cases": rows}, indent=2, ensure_ascii=False) + "\n"
    elif suffix == ".jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:
        raise UsageError(f"cannot write a suite to {path}: name it .yaml, .yml, .json or .jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
    ) as out:
        out.write(text)
    os.replace(out.name, path)  # readers (a reload) never see half a file


class _Row(dict[str, Any]):
    """One case to write: in block style, while its lists and grade maps stay inline."""


class _Dumper(yaml.SafeDumper):
    pass


_MAP_TAG = "tag:yaml.org,2002:map"
_YAML_LINE_BREAKS = "\x85\u2028\u2029"
_Dumper.add_representer(
    _Row, lambda dumper, row: dumper.represent_mapping(_MAP_TAG, row, flow_style=False)
)


def _yaml(rows: list[_Row], allow_unicode: bool) -> str:
    return yaml.dump(
        {"cases": rows},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=allow_unicode,
        default_flow_style=None,  # collections of plain values inline, like [a, b]
        width=100,
    )


def _parse(text: str, file: str, suffix: str) -> tuple[Document, list[Problem]]:
    """The file as ``{"cases": [...]}`` with lines keyed by ``("cases", i, ...)``."""
    if suffix == ".jsonl":
        return _parse_jsonl(text, file)
    duplicates: list[Problem] = []  # reported beside the cases' own problems
    load = load_json if suffix == ".json" else load_yaml
    data, lines = load(text, file, duplicates)
    if isinstance(data, list):  # a bare list of cases
        duplicates = [replace(p, path=f"cases{p.path}") for p in duplicates]
        return Document(file, {"cases": data}, LazyLines(partial(_under_cases, lines))), duplicates
    doc = Document(file, data, lines)
    if data is None:
        return Document(file, {"cases": []}, lines), duplicates
    if not isinstance(data, dict):
        fix = "write cases: followed by a list of cases"
        problem = doc.problem((), "expected a mapping with cases: or a list of cases", fix)
        return doc, [*duplicates, problem]
    problems = duplicates + [
        doc.problem((key,), "unknown field", suggest(str(key), ["cases"], "remove it"))
        for key in data
        if key != "cases"
    ]
    if "cases" not in data:
        problems.append(doc.problem((), "no cases: field", "add cases: with a list of cases"))
    return doc, problems


def _under_cases(lines: Lines) -> LineMap:
    """The lines of a bare list of cases, as if it were written under ``cases:``."""
    return {("cases", *path): line for path, line in lines.items()}


def _parse_jsonl(text: str, file: str) -> tuple[Document, list[Problem]]:
    cases: list[Any] = []
    lines: LineMap = {}
    problems: list[Problem] = []
    # Not splitlines(): JSON strings may hold U+2028 and friends, which are no line ends here.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            fix = "write one JSON object per line"
            problems.append(Problem(file, "", f"not valid JSON: {exc.msg}", fix, number))
            continue
        except _DuplicateKey as exc:
            fix = "keep only one; otherwise the last one silently wins"
            problems.append(Problem(file, "", f"key {exc.key!r} appears twice", fix, number))
            continue
        lines[("cases", len(cases))] = number
        cases.append(case)
    return Document(file, {"cases": cases}, lines), problems


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _read_cases(doc: Document, problems: list[Problem]) -> list[Case]:
    if not isinstance(doc.data, dict) or "cases" not in doc.data:
        return []  # reported by _parse
    raw = doc.data["cases"] or []
    if not isinstance(raw, list):
        fix = "write cases: followed by one '- id: ...' item per case"
        problems.append(doc.problem(("cases",), f"expected a list of cases, got {show(raw)}", fix))
        return []
    if not raw and not problems:  # after lines that failed to parse, "no cases" is just noise
        fix = "add at least one case with an id and a query"
        # A blank or comment-only file, or a .jsonl file, has no cases: line to point at.
        where: NodePath = ("cases",) if ("cases",) in doc.lines else ()
        problems.append(doc.problem(where, "the suite has no cases", fix))
    cases: list[Case] = []
    first_at: dict[str, int] = {}
    for index, item in enumerate(raw):
        at = ("cases", index)
        case_id = _as_id(item.get("id")) if isinstance(item, dict) else None
        if case_id is not None and case_id in first_at:
            first, line = (
                line_of(doc.lines, ("cases", i, "id")) for i in (first_at[case_id], index)
            )
            message = f"id {case_id!r} is used twice (lines {first} and {line})"
            problems.append(doc.problem((*at, "id"), message, "give each case a unique id"))
        elif case_id is not None:
            first_at[case_id] = index
        case = _case(doc, at, item, problems)
        if case is not None:
            cases.append(case)
    return cases


def _case(doc: Document, at: NodePath, raw: Any, problems: list[Problem]) -> Case | None:
    """One case, or None after adding every problem it has to ``problems``."""
    if not isinstance(raw, dict):
        fix = "write each case as a mapping like {id: reset-password, query: ...}"
        problems.append(doc.problem(at, f"expected a case, got {show(raw)}", fix))
        return None
    found = len(problems)

    def bad(field: str | int, message: str, fix: str, *below: str | int) -> None:
        problems.append(doc.problem((*at, field, *below), message, fix))

    for key in raw:
        if key not in _FIELDS:
            bad(key, "unknown field", suggest(str(key), _FIELDS, _REMOVE_UNKNOWN))
    case_id, query = _as_id(raw.get("id")), raw.get("query")
    if case_id is None or not case_id.strip():
        bad("id", f"expected a non-empty id, got {show(raw.get('id'))}", "add id: a short name")
    if not isinstance(query, str) or not query.strip():
        bad("query", f"expected the query text, got {show(query)}", "add query: the question")
    elif len(query) > MAX_QUERY_CHARS:
        message = (
            f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are allowed"
        )
        bad("query", message, "shorten it: a canary asks what a user would ask")
    before_relevant = len(problems)
    relevant = _relevant(raw.get("relevant"), lambda *below: bad("relevant", *below))
    tags = _tags(raw.get("tags") or [], lambda *below: bad("tags", *below))
    weight = _number(raw, "weight", bad)
    if weight is not None and weight <= 0:
        bad("weight", f"{weight!r} is not above 0", "write a weight above 0, like 1.0")
    min_score, max_score = _number(raw, "min_score", bad), _number(raw, "max_score", bad)
    if min_score is not None and max_score is not None and min_score > max_score:
        message = (
            f"min_score {min_score:g} is above max_score {max_score:g}: "
            "no answer can reach the one and stay below the other"
        )
        bad("min_score", message, "lower min_score or raise max_score (or drop one of them)")
    negative = relevant is not None and not any(grade > 0 for grade in relevant.values())
    # Bad grades left out of ``relevant`` must not make a labelled case look negative.
    if negative and "max_score" not in raw and len(problems) == before_relevant:
        fix = "add max_score: the score no result should reach"
        bad("max_score", "a negative canary (no relevant ids) needs max_score", fix)
    if len(problems) > found or case_id is None or not isinstance(query, str):
        return None
    weight = 1.0 if weight is None else weight
    return Case(case_id, query, relevant, tags, weight, min_score, max_score)


def _tags(raw: Any, bad: Callable[..., None]) -> tuple[str, ...]:
    if not isinstance(raw, list):
        bad(f"expected a list of tags, got {show(raw)}", "write tags: [topic, style]")
        return ()
    tags = []
    for index, item in enumerate(raw):
        tag = _as_id(item)
        if tag is None:
            bad(f"expected a tag, got {show(item)}", "write tags as text", index)
        else:
            tags.append(tag)
    return tuple(tags)


def _relevant(raw: Any, bad: Callable[..., None]) -> dict[str, int] | None:
    """Judged ids and grades: a list means grade 1 each; absent or null means label-free."""
    if raw is None:
        return None
    if isinstance(raw, list):
        out = {}
        for index, item in enumerate(raw):
            doc_id = _as_id(item)
            if doc_id is None:
                bad(f"expected a document id, got {show(item)}", "write ids as text", index)
            else:
                out[doc_id] = 1
        return out
    if isinstance(raw, dict):
        grades = {}
        for key, grade in raw.items():
            doc_id = _as_id(key)
            if doc_id is None:
                bad(f"expected a document id, got {show(key)}", "write ids as text", str(key))
            elif isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                bad(f"{show(grade)} is not a grade", _GRADE_FIX, key)
            else:
                grades[doc_id] = grade
        return grades
    fix = "write a list of ids like [doc-1, doc-2], or a mapping of id: grade"
    bad(f"expected a list or a mapping of ids, got {show(raw)}", fix)
    return None


def _number(raw: Mapping[str, Any], field: str, bad: Callable[..., None]) -> float | None:
    """The number in ``field``; None when it is absent, or wrong and reported through ``bad``."""
    value = raw.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        bad(field, f"expected a number, got {show(value)}", "write a number like 0.5")
        return None
    return float(value)


def _as_id(value: Any) -> str | None:
    """An id as text; YAML reads ``42`` as a number, which is meant as the id "42"."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _row(case: Case) -> dict[str, Any]:
    """A case in its shortest file form."""
    row: dict[str, Any] = {"id": case.id, "query": case.query}
    if case.relevant is not None:
        grades = dict(case.relevant)
        row["relevant"] = list(grades) if set(grades.values()) <= {1} else grades
    if case.tags:
        row["tags"] = list(case.tags)
    if case.weight != 1.0:
        row["weight"] = case.weight
    if case.min_score is not None:
        row["min_score"] = case.min_score
    if case.max_score is not None:
        row["max_score"] = case.max_score
    return row


def _plain(value: Any) -> Any:
    """Mappings and sequences as dicts and lists, which both YAML and JSON can write."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
