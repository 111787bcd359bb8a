"""Appending a case, or a label, to a suite file a person maintains, keeping its comments.

YAML is read and written round-trip (ruamel.yaml), so every comment, the order of keys and
the quoting stay as they were; JSON is rewritten with the new case; JSON Lines gains a line.
The result is loaded as a suite before it replaces the file, so a promotion that would break
the suite changes nothing.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from ragcanary.errors import UsageError
from ragcanary.suites.suite import load_suite

_WORD = re.compile(r"[a-z0-9]+")
MAX_SLUG = 60


def case_id_for(query: str, taken: set[str]) -> str:
    """A readable id for ``query`` (its words, joined by dashes) that no case has yet."""
    words = _WORD.findall(query.lower())
    slug = "-".join(words)[:MAX_SLUG].rstrip("-") or "case"
    candidate, n = slug, 2
    while candidate in taken:
        candidate, n = f"{slug}-{n}", n + 1
    return candidate


def append_case(path: Path, case: Mapping[str, Any]) -> None:
    """Add ``case`` at the end of the suite file at ``path``; raise ``ConfigError`` (and leave
    the file as it was) when the suite would not load with it."""
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    if suffix in (".yaml", ".yml"):
        new = _append_yaml(text, case)
    elif suffix == ".json":
        data = json.loads(text)
        data.setdefault("cases", []).append(dict(case))
        new = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif suffix == ".jsonl":
        line = json.dumps(dict(case), ensure_ascii=False) + "\n"
        new = text + ("" if not text or text.endswith("\n") else "\n") + line
    else:
        raise UsageError(f"{path}: cannot add a case to a {suffix or 'extension-less'} file")
    _replace_validated(path, new)


def add_label(path: Path, case_id: str, doc_id: str, grade: int) -> None:
    """Label ``doc_id`` with ``grade`` in case ``case_id`` of the suite file at ``path``
    (a judgment accepted); raise ``ConfigError`` or ``UsageError`` (and leave the file as it
    was) when the case is not there, already labels the id, or the suite would not load.

    A list of relevant ids gains the id when its grade is 1; for another grade the list
    becomes a mapping of id: grade (each listed id keeping grade 1), which says the same.
    """
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    if suffix in (".yaml", ".yml"):
        _, indent, offset = load_yaml_guess_indent(text)
        yaml = _writer(indent or 2, offset or 0)
        data = yaml.load(text)  # again, keeping each value's quotes
        case = _case_in(data.get("cases") if isinstance(data, CommentedMap) else None, case_id)
        case["relevant"] = _labelled(case.get("relevant"), doc_id, grade, commented=True)
        out = io.StringIO()
        yaml.dump(data, out)
        new = out.getvalue()
    elif suffix == ".json":
        data = json.loads(text)
        case = _case_in(data.get("cases") if isinstance(data, dict) else None, case_id)
        case["relevant"] = _labelled(case.get("relevant"), doc_id, grade)
        new = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif suffix == ".jsonl":
        lines = text.splitlines(keepends=True)
        for index, line in enumerate(lines):
            row = json.loads(line) if line.strip() else None
            if isinstance(row, dict) and row.get("id") == case_id:
                row["relevant"] = _labelled(row.get("relevant"), doc_id, grade)
                lines[index] = json.dumps(row, ensure_ascii=False) + "\n"
                break
        else:
            raise UsageError(f"{path}: no case {case_id!r}")
        new = "".join(lines)
    else:
        raise UsageError(f"{path}: cannot label a case in a {suffix or 'extension-less'} file")
    _replace_validated(path, new)


def _case_in(cases: Any, case_id: str) -> Any:
    """The case ``case_id`` of a suite file's ``cases:`` list; ``UsageError`` when none."""
    for case in cases if isinstance(cases, list) else ():
        if isinstance(case, dict) and case.get("id") == case_id:
            return case
    raise UsageError(f"the suite file has no case {case_id!r} (removed or renamed since?)")


def _labelled(relevant: Any, doc_id: str, grade: int, *, commented: bool = False) -> Any:
    """``relevant`` (a list, a mapping or None) with ``doc_id`` at ``grade``."""
    if isinstance(relevant, list | dict) and doc_id in relevant:
        raise UsageError(f"the case labels {doc_id!r} already")
    if isinstance(relevant, list) and grade == 1:
        relevant.append(doc_id)
        return relevant
    if isinstance(relevant, dict):
        relevant[doc_id] = grade
        return relevant
    grades = dict.fromkeys(relevant or (), 1) if isinstance(relevant, list) else {}
    grades[doc_id] = grade
    if not commented:
        return grades
    mapped = CommentedMap(grades)
    mapped.fa.set_flow_style()  # ids and grades stay on one line, as people write them
    return mapped


def _replace_validated(path: Path, new: str) -> None:
    """Write ``new`` as the suite file at ``path`` once it loads as a suite; else raise and
    leave the file as it was."""
    with tempfile.NamedTemporaryFile(
        "w",
        encoding="utf-8",
        dir=path.parent,
        prefix=f".{path.stem}.",
        suffix=path.suffix,
        delete=False,
    ) as out:
        out.write(new)
    try:
        load_suite(Path(out.name), display_name=str(path))
    except BaseException:
        os.unlink(out.name)
        raise
    os.replace(out.name, path)  # a reload never sees half a file


def _append_yaml(text: str, case: Mapping[str, Any]) -> str:
    """``text`` with ``case`` after the last case, indented as the file indents its list.

    When ``cases:`` is the file's last key (the usual layout) the new case is inserted as
    text after the last case, before the comments that close the file, so not one byte of
    the rest changes; otherwise the document is written round-trip.
    """
    data, indent, offset = load_yaml_guess_indent(text)
    if data is None:
        data = CommentedMap()
    if not isinstance(data, CommentedMap):
        raise UsageError("the suite file is not a mapping with a cases: list")
    cases = data.get("cases")
    if cases is not None and not isinstance(cases, CommentedSeq):
        raise UsageError("the suite file's cases: is not a list")
    # ruamel's guess: ``indent`` is where a list item's keys start, ``offset`` where its dash is.
    yaml = _writer(indent or 2, offset or 0)
    if cases is not None and len(cases) and list(data)[-1] == "cases":
        out = io.StringIO()
        yaml.dump({"cases": [_commented(case)]}, out)
        item = out.getvalue().split("\n", 1)[1]  # the lines under "cases:"
        lines = text.splitlines(keepends=True)
        end = len(lines)
        while end and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        head = "".join(lines[:end])
        if head and not head.endswith("\n"):
            head += "\n"
        return head + item + "".join(lines[end:])
    if cases is None:
        cases = data["cases"] = CommentedSeq()
    cases.append(_commented(case))
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _writer(indent: int, offset: int) -> YAML:
    yaml = YAML()  # round-trip: comments, order and quoting are kept
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long query onto two lines
    mapping = indent - offset if indent > offset else indent
    yaml.indent(mapping=mapping, sequence=indent, offset=offset)
    return yaml


def _commented(value: Any) -> Any:
    if isinstance(value, Mapping):
        mapped = CommentedMap()
        for key, item in value.items():
            mapped[key] = _commented(item)
        return mapped
    if isinstance(value, list | tuple):
        seq = CommentedSeq(_commented(v) for v in value)
        seq.fa.set_flow_style()  # ids and tags stay on one line, as people write them
        return seq
    return value
