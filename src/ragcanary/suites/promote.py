"""Appending a case to a suite file a person maintains, keeping its comments and layout.

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
