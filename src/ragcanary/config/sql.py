"""What a pgvector target's config must hold: a dsn, plain SQL names, one ``where`` condition.

Identifiers are the only config values that become SQL text, so they are held to plain names.
``where`` is SQL by nature and trusted config (docs/targets.md, pgvector); the lexical check
here only keeps it one parenthesised condition, so that a slip cannot end the statement or
comment out its ``ORDER BY`` and ``LIMIT``. The read-only transaction and the statement timeout
it runs in are what bound it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ragcanary.config.problems import fix_error as _fix

if TYPE_CHECKING:
    from ragcanary.config.target import TargetConfig

# Names PostgreSQL reads without quotes (less $), at most NAMEDATALEN - 1 bytes.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
NAME_HINT = "letters, digits and _, not starting with a digit, at most 63 characters"
_DSN = re.compile(r"postgres(ql)?(\+psycopg)?://\S+")
DSN_EXAMPLE = "postgresql+psycopg://reader:${PG_PASSWORD}@db:5432/app"
# What a pgvector target reads; any other field is the HTTP targets' and would do nothing.
PGVECTOR_FIELDS = frozenset(
    {"preset", "dsn", "table", "id_column", "vector_column", "distance", "where", "embedding"}
    | {"score_order", "timeout", "concurrency", "rate_limit", "retries"}
)
_INSTEAD = {"url": "connect with dsn: instead", "id": "name the column in id_column: instead"}


def check_pgvector(config: TargetConfig) -> None:
    """A dsn instead of a url, a table and its two columns as plain names, one where condition."""
    for field in sorted(config.model_fields_set - PGVECTOR_FIELDS):
        fix = f"remove {field}:" + (f" ({_INSTEAD[field]})" if field in _INSTEAD else "")
        raise _fix(f"{field} does not apply to the pgvector preset, which speaks SQL", fix, field)
    missing = [
        (field, example)
        for field, value, example in (
            ("dsn", config.dsn, DSN_EXAMPLE),
            ("table", config.table, "chunks"),
            ("id_column", config.id_column, "doc_id"),
            ("vector_column", config.vector_column, "embedding"),
            ("embedding", config.embedding, "NAME (an endpoint under embeddings:)"),
        )
        if value is None
    ]
    if missing:
        raise _fix(
            f"the pgvector preset needs {' and '.join(field for field, _ in missing)}",
            "add " + ", ".join(f"{field}: {example}" for field, example in missing),
        )
    assert config.dsn is not None
    assert config.table is not None
    if not _DSN.fullmatch(config.dsn):
        # Not quoted: a keyword dsn (host=... password=...) cut short would show its secret.
        raise _fix(
            "dsn is not a postgresql:// or postgresql+psycopg:// URL",
            f"write it like {DSN_EXAMPLE}",
            "dsn",
        )
    if not is_table_name(config.table):
        raise _fix(
            f"{config.table!r} is not a table name",
            f"write a name like chunks or public.chunks ({NAME_HINT})",
            "table",
        )
    for field, name in (("id_column", config.id_column), ("vector_column", config.vector_column)):
        if name is not None and not is_identifier(name):
            raise _fix(
                f"{name!r} is not a column name", f"write a name like doc_id ({NAME_HINT})", field
            )
    problem = condition_problem(config.where) if config.where is not None else None
    if problem is not None:
        raise _fix(
            f"the condition {problem}",
            "write one SQL condition, like tenant = 'acme' AND NOT archived, without ;, "
            "comments or $ quotes",
            "where",
        )


def is_identifier(name: str) -> bool:
    """Whether ``name`` is a plain SQL name (a column, a table or a schema)."""
    return _NAME.fullmatch(name) is not None


def is_table_name(name: str) -> bool:
    """Whether ``name`` is ``table`` or ``schema.table``, each part a plain SQL name."""
    return 1 <= len(parts := name.split(".")) <= 2 and all(map(is_identifier, parts))


def condition_problem(condition: str) -> str | None:
    """Why ``condition`` is not one self-contained SQL condition, or None when it is.

    Refused outside quotes: ``;`` (a second statement), ``--`` and ``/*`` (a comment would
    swallow the rest of the statement), ``$`` (dollar quotes this scan cannot follow), and
    parentheses that do not balance (a ``)`` would close the one the condition is wrapped in).
    """
    if not condition.strip():
        return "is empty"
    depth = 0
    at = 0
    while at < len(condition):
        char = condition[at]
        if char in "'\"":
            # E'...' strings take backslash escapes; plain ones and "names" only doubled quotes.
            escapes = char == "'" and _escape_string(condition, at)
            end = _closing_quote(condition, at, escapes)
            if end < 0:
                return f"has a {char} at character {at + 1} that is never closed"
            at = end + 1
            continue
        if condition.startswith(("--", "/*"), at):
            return f"has a comment ({condition[at : at + 2]}) at character {at + 1}"
        if char in ";$":
            return f"has {char!r} at character {at + 1}"
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return f"has a ')' at character {at + 1} that closes nothing it opened"
        at += 1
    if depth:
        return "has a '(' that is never closed"
    return None


def _escape_string(text: str, quote: int) -> bool:
    """Whether the quote at ``quote`` opens an ``E'...'`` string (``E`` not ending a name)."""
    if quote == 0 or text[quote - 1] not in "Ee":
        return False
    return quote == 1 or not (text[quote - 2].isalnum() or text[quote - 2] in "_$")


def _closing_quote(text: str, start: int, escapes: bool) -> int:
    """The index of the quote that closes the one at ``start``; -1 when none does."""
    quote = text[start]
    at = start + 1
    while at < len(text):
        if escapes and text[at] == "\\":
            at += 2
            continue
        if text[at] == quote:
            if text[at + 1 : at + 2] == quote:  # a doubled quote stands for itself
                at += 2
                continue
            return at
        at += 1
    return -1
