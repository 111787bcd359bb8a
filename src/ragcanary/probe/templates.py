"""Request templates, JMESPath response paths, and a request as `validate --live` shows it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from ragcanary.config.target import TargetConfig
from ragcanary.errors import Problem
from ragcanary.probe.responses import first_line

_PLACEHOLDER = re.compile(r"\{(query|k)\}")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")  # e.g. metadata.doc_id


def fill_template(template: Any, query: str, k: int, vector: Sequence[float] | None = None) -> Any:
    """``template`` with ``{query}`` and ``{k}`` filled into every string value, recursively.

    Only those two placeholders are replaced (other braces stay, unlike ``str.format``),
    in one pass so a query containing ``{k}`` is sent literally. A value that is exactly
    ``"{k}"`` becomes the integer ``k``, one that is exactly ``"{vector}"`` the query's
    embedding as a list of numbers. Mapping keys are left as written.
    """
    if isinstance(template, str):
        if template == "{query}":
            return query
        if template == "{k}":
            return k
        if template == "{vector}" and vector is not None:
            return list(vector)
        return _PLACEHOLDER.sub(lambda m: query if m.group(1) == "query" else str(k), template)
    if isinstance(template, Mapping):
        return {key: fill_template(value, query, k, vector) for key, value in template.items()}
    if isinstance(template, list | tuple):
        return [fill_template(value, query, k, vector) for value in template]
    return template


def target_problems(name: str, config: TargetConfig, file: str) -> list[Problem]:
    """Every JMESPath expression of ``config`` that does not compile, as located problems."""
    problems = []
    for field, expression in (
        ("results", config.results),
        ("id", config.id),
        ("score", config.score),
    ):
        if expression is None:
            continue
        try:
            jmespath.compile(expression)
        except JMESPathError as exc:
            problems.append(
                Problem(
                    file=file,
                    path=f"targets.{name}.{field}",
                    message=f"{expression!r} is not a JMESPath expression ({first_line(exc)})",
                    fix="write a path like hits, data.matches or metadata.doc_id",
                )
            )
    return problems


def compile_path(expression: str) -> Callable[[Any], Any]:
    """A function that applies the JMESPath ``expression`` to a parsed JSON document.

    Plain dotted names (``hits``, ``metadata.doc_id``), which most targets need, are looked up
    directly: jmespath walks its syntax tree with a new interpreter on every call, and three
    paths per hit made it a quarter of our CPU per query. Both give the same result.
    """
    if not _DOTTED.fullmatch(expression):
        return jmespath.compile(expression).search
    names = expression.split(".")

    def lookup(document: Any) -> Any:
        for name in names:
            # As jmespath's field: a key of an object, else null (and null stays null).
            if not isinstance(document, dict):
                return None
            document = document.get(name)
        return document

    return lookup


def describe_request(request: tuple[str, str, bytes | None] | None) -> str:
    """``METHOD URL`` and the JSON body, a vector shortened to its first numbers and size."""
    if request is None:
        return "(no request was sent)"
    method, url, body = request
    text = f"{method} {url}"
    if body:
        try:
            text += " " + json.dumps(shorten_vectors(json.loads(body)))
        except ValueError:
            text += f" ({len(body)} bytes)"
    return text


def shorten_vectors(value: object) -> object:
    """Lists of more than eight numbers (vectors) cut to their first three and a count."""
    if isinstance(value, list):
        if len(value) > 8 and all(isinstance(x, int | float) for x in value):
            return [*value[:3], f"... {len(value)} numbers"]
        return [shorten_vectors(v) for v in value]
    if isinstance(value, dict):
        return {k: shorten_vectors(v) for k, v in value.items()}
    return value
