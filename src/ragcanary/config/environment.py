"""What the environment adds to a config: ``${VAR}`` expansion and ``RAGCANARY_*`` overrides."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragcanary.config.yamlfile import NodePath

PREFIX = "RAGCANARY_"  # of the variables that override top-level settings

# "$${" is a literal "${"; "${NAME}" a reference; any other "${" is a mistake to report.
_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{[^}]*\}?")


@dataclass(frozen=True)
class Expansion:
    """A parsed document with ``${VAR}`` expanded, and what went in or could not."""

    data: Any
    values: frozenset[str]  # every non-empty value substituted: secrets to redact
    failures: tuple[tuple[NodePath, str, str], ...]  # (path, what is wrong, fix)


def expand(data: Any, environ: Mapping[str, str]) -> Expansion:
    """Expand ``${VAR}`` in every string value of ``data`` (never in keys) from ``environ``.

    Expanding the parsed values, not the file's text, keeps a value's quotes, colons
    or newlines from changing the YAML around it.
    """
    values: set[str] = set()
    failures: list[tuple[NodePath, str, str]] = []

    def walk(node: Any, at: NodePath) -> Any:
        if isinstance(node, dict):
            return {key: walk(child, (*at, key)) for key, child in node.items()}
        if isinstance(node, list):
            return [walk(child, (*at, index)) for index, child in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            return _REFERENCE.sub(lambda match: substitute(match, at), node)
        return node

    def substitute(match: re.Match[str], at: NodePath) -> str:
        text, name = match.group(0), match.group(1)
        if text == "$${":
            return "${"
        if name is None:
            fix = "write ${NAME} (letters, digits and _), or $${ for a literal ${"
            failures.append((at, f"{text!r} is not a variable reference", fix))
            return text
        if name not in environ:
            fix = f"set it in the environment (export {name}=...) or remove the reference"
            failures.append((at, f"${{{name}}} is not set", fix))
            return text
        if environ[name]:
            values.add(environ[name])
        return environ[name]

    return Expansion(walk(data, ()), frozenset(values), tuple(failures))


def overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The top-level settings that ``RAGCANARY_*`` variables in ``environ`` override.

    pydantic-settings reads them (``config/overrides.py``), imported only when some variable
    could be one: what it imports beyond pydantic took 12-16 ms of the 300 ms a
    ``ragcanary run`` spends before its first query, and that command gates deploys.
    """
    if not any(name.upper().startswith(PREFIX) for name in environ):
        return {}
    from ragcanary.config.overrides import EnvOverrides

    return EnvOverrides.read(environ)


def variable(field: str) -> str:
    """The environment variable that overrides ``field``."""
    return f"{PREFIX}{field.upper()}"
