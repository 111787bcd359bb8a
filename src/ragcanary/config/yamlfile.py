"""YAML and JSON loading that remembers the line of every key and item, for located problems."""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ragcanary.errors import ConfigError, Problem

NodePath = tuple[str | int, ...]
LineMap = dict[NodePath, int]
Lines = Mapping[NodePath, int]  # a LineMap, or lines found only when first asked for

# Config and suite files are at most 10 MB each (docs/config.md, docs/suites.md).
MAX_FILE_BYTES = 10_000_000
ALIAS_FIX = "write the value out; aliases are not allowed"
_ALIASES_SHOWN = 10  # a file full of aliases is reported by its first few, not line by line


def load_yaml(text: str, file: str, problems: list[Problem] | None = None) -> tuple[Any, Lines]:
    """Parse ``text`` like ``yaml.safe_load`` and map every key path to its 1-based line.

    A mapping key's path maps to the key's line, a sequence item's path to the item's
    first line, ``()`` to the document's. Raises ``ConfigError`` for a syntax error, for
    anchors and aliases (refused before anything is expanded) and for nesting too deep
    to read, each a ``Problem`` located in ``file``. Duplicated keys are added to
    ``problems`` when it is given, so the caller can report them beside its own;
    otherwise they are raised too.
    """
    try:
        data, lines, duplicates = _load(text, file)
    except yaml.YAMLError as exc:
        raise ConfigError([_syntax_problem(exc, text, file)]) from exc
    except RecursionError as exc:
        raise ConfigError([_too_deep(file)]) from exc
    except _AliasesFound as exc:
        raise ConfigError(exc.problems) from None
    return data, _report(duplicates, problems, lines)


def load_json(text: str, file: str, problems: list[Problem] | None = None) -> tuple[Any, Lines]:
    """Parse ``text`` as JSON and map every key path to its line, like ``load_yaml``.

    The values come from ``json`` itself: YAML 1.1 reads ``1e5`` as a string and does
    not join ``\\ud83d\\ude00`` surrogate pairs, so JSON-as-YAML only supplies the lines.
    That takes ten times as long as the JSON itself, so a file without duplicated keys gets
    its lines only when a problem asks for one.
    """
    duplicated = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicated
        mapping = dict(items)
        duplicated = duplicated or len(mapping) < len(items)
        return mapping

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [Problem(file, "", f"not valid JSON: {exc.msg}", _JSON_FIX, exc.lineno)]
        ) from exc
    except RecursionError as exc:
        raise ConfigError([_too_deep(file)]) from exc
    if not duplicated:
        return data, LazyLines(lambda: _json_lines(text, file)[0])
    lines, duplicates = _json_lines(text, file)
    return data, _report(duplicates, problems, lines)


def _json_lines(text: str, file: str) -> tuple[LineMap, list[Problem]]:
    """The lines of JSON ``text``, read as YAML, and its duplicated keys."""
    try:
        # Outside strings a tab is only whitespace in JSON, but YAML refuses it as indentation.
        _, lines, duplicates = _load(text.replace("\t", " "), file)
    except (yaml.YAMLError, RecursionError, _AliasesFound):
        return {}, []  # valid JSON that YAML cannot read: correct data, lines unknown
    lines = {tuple(_join_surrogates(part) for part in path): n for path, n in lines.items()}
    return lines, duplicates


class LazyLines(Mapping[NodePath, int]):
    """The line map ``find`` returns, found when it is first asked for."""

    def __init__(self, find: Callable[[], Lines]) -> None:
        self._find: Callable[[], Lines] | None = find
        self._lines: Lines = {}

    def _found(self) -> Lines:
        if self._find is not None:
            self._lines, self._find = self._find(), None
        return self._lines

    def __getitem__(self, path: NodePath) -> int:
        return self._found()[path]

    def __iter__(self) -> Iterator[NodePath]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


def _report(duplicates: list[Problem], problems: list[Problem] | None, lines: Lines) -> Lines:
    """Hand duplicate keys to the caller's ``problems``, or raise them when it has none."""
    if duplicates and problems is None:
        raise ConfigError(duplicates)
    if problems is not None:
        problems.extend(duplicates)
    return lines


def read_text(path: Path, file: str, missing_fix: str, limit: int = MAX_FILE_BYTES) -> str:
    """The text of ``path``; a missing, unreadable, non-UTF-8 or too big file is a ``ConfigError``.

    The size is checked before reading, and no more than ``limit + 1`` bytes are ever read:
    a huge file (or one that grows, or a device) costs neither time nor memory to refuse.
    """
    try:
        size = path.stat().st_size
        if size > limit:
            raise ConfigError([_too_big(file, f"is {size / 1e6:.1f} MB", limit)])
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
        if len(raw) > limit:  # it grew since, or it is a device or a pipe
            raise ConfigError([_too_big(file, f"has more than {limit / 1e6:g} MB", limit)])
        # Not encoding="utf-8-sig": it decodes a lone b"\xef" (a cut-off BOM) as "".
        return raw.removeprefix(codecs.BOM_UTF8).decode("utf-8")
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


def _too_big(file: str, size: str, limit: int) -> Problem:
    return Problem(
        file,
        "",
        f"the file {size}; config and suite files may have at most {limit / 1e6:g} MB",
        "keep it under that; split a large suite into several suite files",
    )


def _too_deep(file: str) -> Problem:
    return Problem(
        file, "", "is nested too deeply to read", "flatten it; no setting nests that deep"
    )


def line_of(lines: Lines, path: NodePath) -> int | None:
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
    lines: Lines

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


class _AliasesFound(Exception):
    """Anchors or aliases in a document: refused before anything could expand them."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems)
        self.problems = problems


# libyaml's parser where PyYAML was built with it: on a 10 MB file it takes seconds where
# the pure-Python one takes a minute. Its error messages are terser, so a file it refuses
# is parsed again by PyYAML for the message (and the line) users read.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(text: str, file: str) -> tuple[Any, Lines, list[Problem]]:
    """Data, line map and duplicate-key problems; raises ``yaml.YAMLError`` on bad syntax.

    Raises ``_AliasesFound`` for a document with anchors or aliases, found from the event
    stream before a single node is built: an expansion bomb never gets to expand.
    """
    try:
        return _load_with(_FAST_LOADER, text, file)
    except yaml.YAMLError as exc:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
        if "maximum nesting depth" in str(exc):
            # PyYAML would take minutes over the same brackets (its scanner is quadratic in
            # the depth of flow collections) only to fail on them too.
            raise RecursionError(str(exc)) from exc
        return _load_with(yaml.SafeLoader, text, file)


def _load_with(loader_class: Any, text: str, file: str) -> tuple[Any, Lines, list[Problem]]:
    if "&" in text or "*" in text:  # else there is no anchor (&a) or alias (*a) to find
        _refuse_aliases(loader_class, text, file)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, []
        # Duplicates are looked for before construction, which would hide them.
        duplicates = _duplicate_keys(loader, node, file)
        data = loader.construct_document(node)
        # Lines are only read for problems: found when first asked for, from the nodes.
        return data, LazyLines(partial(_lines, loader, node)), duplicates
    finally:
        loader.dispose()  # the parser's; constructing keys for _lines needs none


def _refuse_aliases(loader_class: Any, text: str, file: str) -> None:
    """Raise ``_AliasesFound`` naming the first few anchors and aliases, counting the rest."""
    shown: dict[tuple[int, str], None] = {}  # "*a, *a" on one line is one problem
    count = 0
    for event in yaml.parse(text, Loader=loader_class):
        anchor = getattr(event, "anchor", None)
        if anchor is None:
            continue
        count += 1
        if len(shown) < _ALIASES_SHOWN:
            kind = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            line = event.start_mark.line + 1 if event.start_mark is not None else 1
            shown[(line, f"{kind}{anchor}")] = None
    if count:
        raise _AliasesFound(_alias_problems(list(shown), count, file))


def _alias_problems(found: list[tuple[int, str]], count: int, file: str) -> list[Problem]:
    """One problem per anchor or alias noted, the last one counting those not shown."""
    problems = [
        Problem(file, "", f"YAML {what} is not allowed", ALIAS_FIX, line) for line, what in found
    ]
    more = count - len(found)
    if more > 0 and len(found) == _ALIASES_SHOWN:
        last = problems[-1]
        message = f"{last.message} (and {more} more anchors or aliases)"
        problems[-1] = Problem(file, "", message, ALIAS_FIX, last.line)
    return problems


def _key(loader: Any, node: yaml.Node) -> str | int | None:
    """A mapping key as a path element; None for keys a config never uses (lists, floats...)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
        return None
    key = loader.construct_object(node)
    if isinstance(key, bool) or not isinstance(key, str | int):
        return None
    return key


def _duplicate_keys(loader: Any, root: yaml.Node, file: str) -> list[Problem]:
    """Every key written twice in one mapping, at the second one's line and dotted path."""
    problems: list[Problem] = []
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    visited: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{index}]") for index, item in enumerate(node.value))
        if not isinstance(node, yaml.MappingNode):
            continue
        first_line: dict[str | int, int] = {}
        for key_node, value_node in node.value:
            key = _key(loader, key_node)
            below = f"{path}.{key}" if path else str(key)
            stack.append((value_node, below))
            line = key_node.start_mark.line + 1
            if key is None:
                continue
            if key in first_line:
                problems.append(
                    Problem(
                        file,
                        below,
                        f"key {key!r} appears twice (lines {first_line[key]} and {line})",
                        "keep only one; otherwise the last one silently wins",
                        line,
                    )
                )
            else:
                first_line[key] = line
    return sorted(problems, key=lambda p: p.line or 0)


def _lines(loader: Any, root: yaml.Node) -> LineMap:
    """The line of every path in the document under ``root``: a key's own line, an item's
    first line. Walked without recursion, as deep as the parser went."""
    lines: LineMap = {}
    stack: list[tuple[yaml.Node, NodePath]] = [(root, ())]
    # Documents with aliases are refused before this; the guard stays so that no shared
    # node could ever be walked twice (or forever, were one recursive).
    visited: set[int] = set()
    while stack:
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in visited:
            continue
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
                stack.append((value_node, (*path, key)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, index)) for index, item in enumerate(node.value))
    return lines


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
