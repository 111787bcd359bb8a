"""Turning pydantic validation errors into located problems that say what to write instead."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails, PydanticCustomError

from ragcanary.config.yamlfile import MISSING, NodePath, child

# A validator raises ``fix_error`` to carry its own fix; ``explain`` reads it back.
_OWN = "ragcanary"
_NUMBER = ("a whole number", "write a whole number, like 8")
_FLOAT = ("a number", "write a number, like 0.5")
_BOOL = ("true or false", "write true or false")
_MAPPING = ("a mapping", "write key: value pairs indented below it")
_EXPECTED = {  # error type -> (what was expected, what to write)
    "int_type": _NUMBER,
    "int_parsing": _NUMBER,
    "int_from_float": _NUMBER,
    "int_parsing_size": _NUMBER,
    "float_type": _FLOAT,
    "float_parsing": _FLOAT,
    "finite_number": _FLOAT,
    "bool_type": _BOOL,
    "bool_parsing": _BOOL,
    "string_type": ("text", "write text, in quotes if it could be read as a number or date"),
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
    "list_type": ("a list", "write a list, like [a, b]"),
}
_BOUNDS = {  # error type -> (ctx key, how the value misses, what to write)
    "greater_than_equal": ("ge", "below", "a number of {} or more"),
    "greater_than": ("gt", "not above", "a number above {}"),
    "less_than_equal": ("le", "above", "a number of {} or less"),
    "less_than": ("lt", "not below", "a number below {}"),
}


def fix_error(message: str, fix: str, *at: str | int) -> PydanticCustomError:
    """A validation error that carries its fix; ``at`` locates it below the validated field."""
    return PydanticCustomError(_OWN, "{message}", {"message": message, "fix": fix, "at": at})


def explain(
    error: ErrorDetails,
    data: Any,
    model: type[BaseModel],
    examples: dict[str, str],
    hide: Callable[[str], str] = lambda text: text,
) -> tuple[NodePath, str, str]:
    """Where in ``data`` a pydantic error of ``model`` is, what is wrong, and what to write.

    ``examples`` give a value to suggest for a missing or empty field, by field name.
    ``hide`` redacts a text value before it is shortened for the message: redacting the
    message afterwards would miss a secret cut in half by the shortening.
    """
    where = _data_path(error["loc"], data)
    kind, ctx = error["type"], error.get("ctx") or {}
    name = str(where[-1]) if where else ""
    value = error["input"]
    shown = show(hide(value) if isinstance(value, str) else value)
    if kind == _OWN:
        return (*where, *ctx["at"]), ctx["message"], ctx["fix"]
    if kind == "missing":
        return where, "required field is missing", f"add {name}: {examples.get(name, '...')}"
    if kind == "extra_forbidden":
        known = _fields_at(model, where[:-1])
        fix = suggest(name, known, f"remove it (known: {', '.join(known)})")
        return where, "unknown field", fix
    if kind == "invalid_key":
        return where, f"the key {shown} is not text", "quote the key, or remove it"
    if kind == "too_short":
        return where, "is empty", f"write it like {name}: {examples.get(name, '[...]')}"
    if kind == "literal_error":
        return where, f"{shown} is not allowed", f"write {ctx['expected']}"
    if kind in _BOUNDS:
        key, misses, wanted = _BOUNDS[kind]
        return where, f"{shown} is {misses} {ctx[key]}", f"write {wanted.format(ctx[key])}"
    if kind in _EXPECTED:
        expected, fix = _EXPECTED[kind]
        return where, f"expected {expected}, got {shown}", fix
    message = error["msg"]
    return where, message[:1].lower() + message[1:], "see the configuration section of README.md"


def suggest(name: str, known: list[str], otherwise: str) -> str:
    """``did you mean 'every'?`` for the closest of ``known``, else ``otherwise``."""
    close = difflib.get_close_matches(name, known, n=1)
    return f"did you mean {close[0]!r}?" if close else otherwise


def _data_path(loc: tuple[str | int, ...], data: Any) -> NodePath:
    """The path in the file of a pydantic ``loc``, without tags like ``function-after[...]``."""
    where: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        found = child(node, part)
        if found is not MISSING:
            node = found
        elif isinstance(node, dict) and index == len(loc) - 1:
            pass  # a missing field, named below its parent
        elif isinstance(node, dict | list):
            continue  # a tag pydantic adds for a union member or a dict key
        else:
            break
        where.append(part)
    return tuple(where)


def show(value: Any) -> str:
    """A value as a message quotes it: repr, shortened; containers by their kind."""
    if value is None:
        return "an empty value"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_at(model: type[BaseModel], where: NodePath) -> list[str]:
    """The fields of the model found at ``where`` below ``model`` (none when it is not a model)."""
    parts = list(where)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return []
        annotation = field.annotation
        if get_origin(annotation) is dict and parts:
            annotation = get_args(annotation)[1]
            parts.pop(0)
        # An optional section (``slo: SloConfig | None``) is its model when written.
        models = [a for a in get_args(annotation) if isinstance(a, type) and a is not type(None)]
        if get_origin(annotation) is not dict and len(models) == 1:
            annotation = models[0]
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
