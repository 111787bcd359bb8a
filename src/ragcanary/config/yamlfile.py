"""YAML and JSON loading that remembers the line of every key and item, for located problems."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragcanary.errors import ConfigError, Problem

NodePath = tuple[str | int, ...]
LineMap = dict[NodePath, int]


def load_yaml(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse ``text`` like ``yaml.safe_load`` and map every key path to its 1-based line.

    A mapping key's path maps to the key's line, a sequence item's path to the item's
    first line, ``()`` to the document's. Raises ``ConfigError`` for a syntax error or
    for duplicated keys, each a ``Problem`` located in ``file``.
    """
    try:
        data, lines, duplicates = _load(text, file)
    except yaml.YAMLError as exc:
        raise ConfigError([_syntax_problem(exc, text, file)]) from exc
    if duplicates:
        raise ConfigError(duplicates)
    return data, lines


def load_json(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse ``text`` as JSON and map every key path to its line, like ``load_yaml``.

    The values come from ``json`` itself: YAML 1.1 reads ``1e5`` as a string and does
    not join ``\\ud83d\\ude00`` surrogate pairs, so JSON-as-YAML only supplies the lines.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [Problem(file, "", f"not valid JSON: {exc.msg}", _JSON_FIX, exc.lineno)]
        ) from exc
    try:
        # Outside strings a tab is only whitespace in JSON, but YAML refuses it as indentation.
        _, lines, duplicates = _load(text.replace("\t", " "), file)
    except yaml.YAMLError:
        return data, {}  # valid JSON that YAML cannot read: correct data, lines unknown
    if duplicates:
        raise ConfigError(duplicates)
    return data, {tuple(_join_surrogates(part) for part in path): n for path, n in lines.items()}


def read_text(path: Path, file: str, missing_fix: str) -> str:
    """The text of ``path``; a missing, unreadable or non-UTF-8 file is a ``ConfigError``."""
    try:
        # Not encoding="utf-8-sig": it decodes a lone b"\xef" (a cut-off BOM) as "".
        return path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except FileNotFoundError as exc:
        raise ConfigError([Problem(file, "", "file not found", missing_fix)]) from exc
    except IsADirectoryError as exc:
        raise ConfigError(
            [Problem(file, "", "is a directory, not a file", "name the file itself")]
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem(file, "", f"is not UTF-8 text ({exc.reason})", "save it as UTF-8")]
        ) from exc
    except OSError as exc:
        raise ConfigError(
            [Problem(file, "", f"cannot be read ({exc.strerror})", "check its permissions")]
        ) from exc


def line_of(lines: LineMap, path: NodePath) -> int | None:
    """The line of ``path``, else of its nearest ancestor that has one (e.g. a missing key)."""
    for end in range(len(path), -1, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None


def dotted(path: NodePath, data: Any = None) -> str:
    """Render ``path`` like ``suites.core.thresholds.hit_rate.5`` or ``cases[3].query``.

    An int is a list index (``[3]``) when ``data`` holds a list at that point; otherwise,
    or where ``data`` does not reach, it is a mapping key like any other.
    """
    out = ""
    node = data
    for part in path:
        if isinstance(part, int) and isinstance(node, list):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        node = child(node, part)
    return out


@dataclass(frozen=True)
class Document:
    """A parsed file with what it takes to locate a problem in it."""

    file: str  # as the user would recognise it
    data: Any
    lines: LineMap

    def problem(self, path: NodePath, message: str, fix: str) -> Problem:
        """A ``Problem`` at ``path`` of this document, with its dotted path and line."""
        return Problem(self.file, dotted(path, self.data), message, fix, line_of(self.lines, path))


MISSING = object()  # what ``child`` finds where there is nothing


def child(node: Any, part: str | int) -> Any:
    """``node[part]`` for a mapping key or list index, else ``MISSING``."""
    if isinstance(node, dict):
        return node.get(part, MISSING)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return MISSING


_JSON_FIX = "check the commas, quotes and brackets around that line"


def _join_surrogates(part: str | int) -> str | int:
    """A key as json reads it: YAML leaves ``\\ud83d\\ude00`` as two halves of one character."""
    if isinstance(part, str) and any("\ud800" <= ch <= "\udfff" for ch in part):
        return part.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return part


def _load(text: str, file: str) -> tuple[Any, LineMap, list[Problem]]:
    """Data, line map and duplicate-key problems; raises ``yaml.YAMLError`` on bad syntax."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, []
        # Duplicates are looked for before construction, which flattens merges (``<<``)
        # into pairs that legitimately repeat a key.
        duplicates = _duplicate_keys(loader, node, file)
        data = loader.construct_document(node)
        lines: LineMap = {}
        _record_lines(loader, node, (), lines, set())
        return data, lines, duplicates
    finally:
        loader.dispose()


def _key(loader: yaml.SafeLoader, node: yaml.Node) -> str | int | None:
    """A mapping key as a path element; None for keys a config never uses (lists, floats...)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
        return None
    key = loader.construct_object(node)
    if isinstance(key, bool) or not isinstance(key, str | int):
        return None
    return key


def _duplicate_keys(loader: yaml.SafeLoader, root: yaml.Node, file: str) -> list[Problem]:
    problems: list[Problem] = []
    stack = [root]
    visited: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        if not isinstance(node, yaml.MappingNode):
            continue
        first_line: dict[str | int, int] = {}
        for key_node, value_node in node.value:
            stack.append(value_node)
            key = _key(loader, key_node)
            line = key_node.start_mark.line + 1
            if key is None:
                continue
            if key in first_line:
                problems.append(
                    Problem(
                        file,
                        "",
                        f"key {key!r} appears twice (lines {first_line[key]} and {line})",
                        "keep only one; otherwise the last one silently wins",
                        line,
                    )
                )
            else:
                first_line[key] = line
    return sorted(problems, key=lambda p: p.line or 0)


def _record_lines(
    loader: yaml.SafeLoader, node: yaml.Node, path: NodePath, lines: LineMap, visited: set[int]
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    # An aliased node is walked once and located where its anchor is: PyYAML keeps no
    # line for the alias. This also stops recursive and exponentially nested aliases.
    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        # After merges flatten a mapping, an own key follows the merged one it overrides.
        pairs = {}
        for key_node, value_node in node.value:
            key = _key(loader, key_node)
            if key is not None:
                pairs[key] = (key_node, value_node)
        for key, (key_node, value_node) in pairs.items():
            lines[(*path, key)] = key_node.start_mark.line + 1
            _record_lines(loader, value_node, (*path, key), lines, visited)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(loader, item, (*path, index), lines, visited)


def _syntax_problem(exc: yaml.YAMLError, text: str, file: str) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "cannot parse"
        if exc.context and exc.context_mark is not None and exc.context_mark.line + 1 != line:
            context = exc.context.removeprefix("while ")
            what += f" ({context} that starts at line {exc.context_mark.line + 1})"
        return Problem(file, "", f"YAML syntax error: {what}", _syntax_fix(what), line)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return Problem(
            file,
            "",
            f"YAML syntax error: unacceptable character #x{exc.character:04x}",
            "remove the control character or write it as an escape in a double-quoted string",
            line,
        )
    return Problem(file, "", f"YAML syntax error: {exc}", _syntax_fix(str(exc)))


def _syntax_fix(what: str) -> str:
    if "'\\t'" in what:
        return "indent with spaces; YAML does not allow tabs there"
    if "single document" in what:
        return "keep one document per file (remove the extra ---)"
    if "constructor" in what:
        return "remove the !tag; only plain YAML values are allowed"
    return (
        "check the indentation, colons and quotes around that line "
        "(quote values that contain ': ' or ' #')"
    )
