"""The config file with every suite file it names, loaded and checked together.

Here rather than in ``config/``: loading a config loads its suites, and ``suites/`` sits above
``config/`` (a suite file is read with the config's YAML loader and located problems).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jmespath
import jmespath.exceptions
from pydantic import ValidationError

from ragcanary.config.credentials import credential_secrets
from ragcanary.config.environment import expand, overrides, variable
from ragcanary.config.model import Config, mentions_query, password_of
from ragcanary.config.problems import explain, suggest
from ragcanary.config.target import URL_EXAMPLE
from ragcanary.config.units import format_duration
from ragcanary.config.yamlfile import Document, NodePath, dotted, load_yaml, read_text
from ragcanary.errors import ConfigError, Problem
from ragcanary.measure.cases import Suite
from ragcanary.redact import Redactor
from ragcanary.suites.suite import load_suite

CONFIG_FILE = "ragcanary.yaml"
_EXAMPLES = {"url": URL_EXAMPLE, "cases": "suites/core.yaml", "targets": "[docs-search]"}


def config_path(option: Path | None, environ: Mapping[str, str]) -> Path:
    """The config file: ``--config``, else ``$RAGCANARY_CONFIG``, else ``./ragcanary.yaml``."""
    if option is not None:
        return option
    return Path(environ.get("RAGCANARY_CONFIG") or CONFIG_FILE)


@dataclass(frozen=True)
class LoadedConfig:
    """A valid config with its suites loaded, and the values that logs and the API must hide."""

    config: Config
    path: Path  # the config file
    suites: dict[str, Suite]  # suite name -> its cases; suite files resolve beside the config
    # every ${VAR} value, header value, admin token and URL password (and its Basic token)
    secrets: frozenset[str]


def load_config(
    path: Path, environ: Mapping[str, str], *, query_targets: bool = True, cases: bool = True
) -> LoadedConfig:
    """Read and validate the config at ``path`` and load every suite file it names.

    ``cases=False`` leaves the suite files unread (``suites`` empty): for commands that need
    the config alone, such as ``rules``, where the files are mounted elsewhere.

    ``${VAR}`` in string values is expanded from ``environ`` after parsing, and
    ``RAGCANARY_*`` variables override top-level settings. Raises ``ConfigError``
    listing every problem in the config and in its suite files.

    ``query_targets=False`` is for commands that only read stored runs (diff, history,
    runs, baseline show): the retrievers' secrets need not be set then, so a variable missing
    from the environment inside ``targets:`` reads as ``unset`` instead of being an error.
    """
    file = str(path)
    text = read_text(path, file, "create it, or pass --config FILE or set RAGCANARY_CONFIG")
    duplicates: list[Problem] = []  # reported with the model's problems, not instead of them
    raw, lines = load_yaml(text, file, duplicates)
    if raw is None:
        raw = {}  # every setting has a default
    if not isinstance(raw, dict):
        fix = "start it with keys like storage:, targets: and suites:"
        raise ConfigError([Problem(file, "", "the config is not a mapping of settings", fix, 1)])
    expansion = expand(raw, environ if query_targets else _TargetsNeedNoSecrets(environ, raw))
    overridden = overrides(environ)
    data = {**expansion.data, **overridden}
    doc = Document(file, data, lines)

    failed = {where for where, _, _ in expansion.failures}
    secrets = _secrets(data, expansion.values, failed)
    redact = Redactor(secrets)
    problems = duplicates + [
        doc.problem(where, message, fix) for where, message, fix in expansion.failures
    ]
    config = None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            where, message, fix = explain(error, data, Config, _EXAMPLES, hide=redact)
            # A value whose ${VAR} failed is reported already; its leftover text would add noise.
            if any(where[: len(failed)] == failed for failed, _, _ in expansion.failures):
                continue
            if len(where) == 1 and where[0] in overridden:
                source = f"environment variable {variable(str(where[0]))}"
                problems.append(Problem(source, dotted(where), message, fix))
            else:
                problems.append(doc.problem(where, message, fix))
    suites, suite_problems = _load_suites(doc, path.parent) if cases else ({}, [])
    problems += _check_targets(doc) + _check_suites(doc)
    if config is not None:
        problems += _check_slo_windows(doc, config)
    problems += [p for p in suite_problems if p.file == file]
    problems.sort(key=lambda p: (p.line is None, p.line or 0))  # the file's own, top to bottom
    problems += [p for p in suite_problems if p.file != file]
    problems = [
        replace(
            p,
            file=redact(p.file),
            path=redact(p.path),
            message=redact(p.message),
            fix=redact(p.fix),
        )
        for p in problems
    ]
    if problems or config is None:
        raise ConfigError(problems)
    return LoadedConfig(config, path, suites, secrets)


def locate(loaded: LoadedConfig, path: NodePath, message: str, fix: str) -> Problem:
    """A problem at ``path`` of ``loaded``'s config file, found after loading (by a run): the
    file is read again for its line, or named without one if it can no longer be read."""
    file = str(loaded.path)
    try:
        data, lines = load_yaml(read_text(loaded.path, file, ""), file, [])
    except ConfigError:
        return Problem(file, dotted(path), message, fix)
    return Document(file, data, lines).problem(path, message, fix)


class _TargetsNeedNoSecrets(Mapping[str, str]):
    """``environ`` plus ``unset`` for every variable that only the targets and embeddings use."""

    def __init__(self, environ: Mapping[str, str], raw: Mapping[str, Any]) -> None:
        queried = ("targets", "embeddings", "judges")  # what only talking to a retriever needs
        outside = {key: value for key, value in raw.items() if key not in queried}
        used_outside = set(_REFERENCE_NAME.findall(repr(outside)))
        used_by_targets = set(_REFERENCE_NAME.findall(repr([raw.get(key) for key in queried])))
        self._environ = environ
        self._unset = used_by_targets - used_outside - set(environ)

    def __getitem__(self, name: str) -> str:
        return "unset" if name in self._unset else self._environ[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._environ
        yield from self._unset

    def __len__(self) -> int:
        return len(self._environ) + len(self._unset)

    def __contains__(self, name: object) -> bool:
        return name in self._unset or name in self._environ


_REFERENCE_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _check_targets(doc: Document) -> list[Problem]:
    """What a target's fields cannot say alone: the query is sent, the response paths parse.

    Checked here rather than on ``TargetConfig`` so that code building a target
    directly (tests, adapters) is not held to the shape of a config file.
    """
    targets, embeddings = doc.data.get("targets"), doc.data.get("embeddings")
    endpoints = [str(e) for e in embeddings] if isinstance(embeddings, dict) else []
    problems: list[Problem] = []
    for name, target in targets.items() if isinstance(targets, dict) else ():
        if not isinstance(target, dict):
            continue
        embedding = target.get("embedding")
        templates = (target.get("body"), target.get("params"))
        sends_vector = any(mentions_query(t, "{vector}") for t in templates)
        preset = target.get("preset", "http")
        if not any(mentions_query(t) for t in templates) and not sends_vector and preset == "http":
            problems.append(
                doc.problem(
                    ("targets", name),
                    "neither body nor params mentions {query}, so the query is never sent",
                    'add body: {q: "{query}"} (POST) or params: {q: "{query}"} (GET)',
                )
            )
        if isinstance(embedding, str) and embedding not in endpoints:
            fix = suggest(embedding, endpoints, "define it under embeddings:")
            where = ("targets", name, "embedding")
            problems.append(doc.problem(where, f"unknown embedding {embedding!r}", fix))
        elif sends_vector and not embedding:
            problems.append(
                doc.problem(
                    ("targets", name),
                    "{vector} is sent but no embedding makes one",
                    "set embedding: NAME to an endpoint under embeddings:",
                )
            )
        fetch = target.get("fetch")
        fetched = fetch.get("text") if isinstance(fetch, dict) else None
        for field in ("results", "id", "score", ("fetch", "text")):
            expression = fetched if isinstance(field, tuple) else target.get(field)
            if not isinstance(expression, str):
                continue
            try:
                jmespath.compile(expression)
            except jmespath.exceptions.JMESPathError:
                problems.append(
                    doc.problem(
                        ("targets", name, *(field if isinstance(field, tuple) else (field,))),
                        f"{expression!r} is not a JMESPath expression",
                        "write a path like hits, data.matches or metadata.doc_id",
                    )
                )
    return problems


def _check_suites(doc: Document) -> list[Problem]:
    """A cut-off written twice in ``k`` (the model keeps it once, the file should too), and a
    ``judge:`` that names no judge."""
    suites, raw_judges = doc.data.get("suites"), doc.data.get("judges")
    judges = [str(j) for j in raw_judges] if isinstance(raw_judges, dict) else []
    problems: list[Problem] = []
    for name, suite in suites.items() if isinstance(suites, dict) else ():
        judge = suite.get("judge") if isinstance(suite, dict) else None
        if isinstance(judge, str) and judge not in judges:
            fix = suggest(judge, judges, "define it under judges:")
            problems.append(doc.problem(("suites", name, "judge"), f"unknown judge {judge!r}", fix))
        k = suite.get("k") if isinstance(suite, dict) else None
        seen: set[int] = set()
        for index, value in enumerate(k if isinstance(k, list) else []):
            if not isinstance(value, int) or isinstance(value, bool):
                continue  # not a cut-off at all: the model says so
            if value in seen:
                message = f"k lists {value} more than once"
                fix = f"list each cut-off once (remove this {value})"
                problems.append(doc.problem(("suites", name, "k", index), message, fix))
            seen.add(value)
    return problems


def _check_slo_windows(doc: Document, config: Config) -> list[Problem]:
    """An SLO window longer than ``retention``: its budget would be counted from runs that
    were pruned (docs/slo.md)."""
    return [
        doc.problem(
            ("suites", name, "slo", "window"),
            f"the window {format_duration(suite.slo.window)} is longer than retention "
            f"({format_duration(config.retention)}): its oldest runs would be pruned",
            f"shorten the window, or set retention: {format_duration(suite.slo.window)} or more",
        )
        for name, suite in config.suites.items()
        if suite.slo is not None and suite.slo.window > config.retention
    ]


def _load_suites(doc: Document, base: Path) -> tuple[dict[str, Suite], list[Problem]]:
    """Each suite's cases, and problems with its target names and suite file."""
    raw_suites, raw_targets = doc.data.get("suites"), doc.data.get("targets")
    if not isinstance(raw_suites, dict):
        return {}, []
    names = [str(name) for name in raw_targets] if isinstance(raw_targets, dict) else []
    suites: dict[str, Suite] = {}
    problems: list[Problem] = []
    loaded: dict[Path, Suite | None] = {}  # a file shared by suites is loaded and reported once
    for name, raw in raw_suites.items():
        if not isinstance(raw, dict):
            continue
        targets = raw.get("targets")
        for index, target in enumerate(targets if isinstance(targets, list) else []):
            if isinstance(target, str) and target not in names:
                fix = suggest(target, names, "define it under targets:")
                where = ("suites", name, "targets", index)
                problems.append(doc.problem(where, f"unknown target {target!r}", fix))
        cases = raw.get("cases")
        if not isinstance(cases, str) or not cases:
            continue
        file = base / cases
        if file not in loaded:
            loaded[file] = None
            if not file.is_file():
                fix = "correct the path (relative to the config file) or draft one with bootstrap"
                message = f"suite file {str(file)!r} not found"
                problems.append(doc.problem(("suites", name, "cases"), message, fix))
                continue
            try:
                loaded[file] = load_suite(file, display_name=str(file))
            except ConfigError as exc:
                problems.extend(exc.problems)
        suite = loaded[file]
        if suite is not None:
            suites[str(name)] = suite
    return suites, problems


def _secrets(
    data: Mapping[str, Any], expanded: frozenset[str], failed: set[NodePath]
) -> frozenset[str]:
    """Values to redact. A value whose ``${VAR}`` is unset holds no secret but the reference
    itself, and masking it would turn "${KEY} is not set" into "*** is not set"."""
    secrets = set(expanded)

    def add(path: NodePath, value: Any, part: Callable[[str], str | None] = str) -> None:
        if isinstance(value, str) and path not in failed:
            secrets.add(part(value) or "")

    for section in ("targets", "embeddings", "judges"):
        entries = data.get(section)
        for name, entry in entries.items() if isinstance(entries, dict) else ():
            headers = entry.get("headers") if isinstance(entry, dict) else None
            for header, value in headers.items() if isinstance(headers, dict) else ():
                add((section, name, "headers", header), value)
            if isinstance(entry, dict):
                url = entry.get("url")
                if isinstance(url, str) and (section, name, "url") not in failed:
                    secrets.update(credential_secrets(url))  # also as sent: Basic, decoded
                endpoints = entry.get("endpoints")
                for endpoint, other in endpoints.items() if isinstance(endpoints, dict) else ():
                    where = (section, name, "endpoints", endpoint)
                    if isinstance(other, str) and where not in failed:
                        secrets.update(credential_secrets(other))
                add((section, name, "dsn"), entry.get("dsn"), password_of)
    add(("admin_token",), data.get("admin_token"))
    add(("ingest_token",), data.get("ingest_token"))
    add(("storage",), data.get("storage"), password_of)
    secrets.discard("")
    return frozenset(secrets)
