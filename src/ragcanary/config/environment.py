"""What the environment adds to a config: ``${VAR}`` expansion and ``RAGCANARY_*`` overrides."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from ragcanary.config.yamlfile import NodePath

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


class EnvOverrides(BaseSettings):
    """Top-level settings the environment overrides: ``RAGCANARY_STORAGE`` beats ``storage:``."""

    model_config = SettingsConfigDict(env_prefix="RAGCANARY_", env_ignore_empty=True)

    storage: str | None = None
    listen: str | None = None
    log_level: str | None = None
    log_format: str | None = None
    admin_token: str | None = None
    ingest_token: str | None = None
    ui_url: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> dict[str, str]:
        """The overrides set in ``environ`` (not ``os.environ``), keyed by config field."""
        found = _EnvironSource(cls, environ)()
        return {name: value for name, value in found.items() if isinstance(value, str)}

    @staticmethod
    def variable(field: str) -> str:
        """The environment variable that overrides ``field``."""
        return f"RAGCANARY_{field.upper()}"


class _EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        # Normalised as the source does os.environ: names case-insensitive, empty means unset.
        self.env_vars = {name.lower(): value for name, value in environ.items() if value}
