"""What the weaviate, vespa, rushdb and chroma presets need of a target's config.

A Weaviate class and property names, and Vespa's sources, fields and query tensor, are
written into the text of a GraphQL or YQL query: each must be a plain name, checked here,
so that nothing from the config reaches a query unchecked. (The canary's text and vector
never do: they are escaped literals or request parameters.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.sql import check_pgvector

if TYPE_CHECKING:
    from ragcanary.config.target import TargetConfig

_API_PREFIX = re.compile(r"(/api/v[0-9]+)/*$")  # Chroma's versioned API, at the url's end
NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]*")  # a GraphQL name; also a Vespa identifier
WEAVIATE_CLASS = re.compile(r"[A-Z][_0-9A-Za-z]*")
DOTTED_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]*(\.[_A-Za-z][_0-9A-Za-z]*)*")
# Fields that only one preset reads: set on another target, they would silently do nothing.
OWN_FIELDS = {"search": "weaviate", "rank_profile": "vespa", "query_tensor": "vespa"}
OWN_FIELDS |= dict.fromkeys(
    ("dsn", "table", "id_column", "vector_column", "distance", "where"), "pgvector"
)


def check_chroma_url(url: str, at: tuple[str, ...] = ("url",)) -> None:
    """A url that ends in Chroma's API prefix: the preset adds /api/v2 itself, so every request
    would go to /api/v2/api/v2/... and every lookup say "collection not found"."""
    parts = urlsplit(url)
    found = _API_PREFIX.search(parts.path)
    if found is None:
        return
    prefix = found.group(1)
    root = urlunsplit((parts.scheme, parts.netloc, parts.path[: found.start()], "", ""))
    adds = "which the chroma preset adds" if prefix == "/api/v2" else "and the chroma preset adds"
    raise _fix(
        f"{url!r} ends in {prefix}, {adds} /api/v2 itself",
        f"write {at[-1]}: {root}, the server's root",
        *at,
    )


def check_own_fields(config: TargetConfig) -> None:
    """A field of one preset (``search:`` of Weaviate, say) set on a target of another."""
    for field, preset in OWN_FIELDS.items():
        if config.preset != preset and field in config.model_fields_set:
            raise _fix(f"{field} is read by the {preset} preset only", f"remove {field}:", field)


def check_weaviate(config: TargetConfig) -> None:
    """A class by name, a search operator that fits ``embedding:``, and GraphQL-safe names."""
    name = config.collection
    if name is None:
        raise _fix("the weaviate preset needs collection (the class)", "add collection: Article")
    if not WEAVIATE_CLASS.fullmatch(name):
        fix = "write letters, digits and _ only, starting with a capital letter, like Article"
        if NAME.fullmatch(name) and name[0].isalpha():
            fix = f"write collection: {name[0].upper()}{name[1:]} (Weaviate capitalises it)"
        raise _fix(f"{name!r} is not a Weaviate class name", fix, "collection")
    if config.id not in ("id", "_additional.id") and not DOTTED_NAME.fullmatch(config.id):
        raise _fix(
            f"{config.id!r} is not a property of a Weaviate object",
            "write a property name like doc_id (nested: meta.doc_id), or remove id: for the "
            "object's UUID",
            "id",
        )
    search = config.search or ("nearVector" if config.embedding is not None else None)
    if search is None:
        raise _fix(
            "the weaviate preset needs embedding (a nearVector search) or search: nearText, "
            "bm25 or hybrid",
            "add embedding: NAME (an endpoint under embeddings:), or search: bm25",
        )
    if search == "nearVector" and config.embedding is None:
        raise _fix(
            "search: nearVector needs the query's vector, and no embedding makes one",
            "add embedding: NAME, or use search: nearText, bm25 or hybrid",
            "search",
        )
    if search in ("nearText", "bm25") and config.embedding is not None:
        raise _fix(
            f"search: {search} sends the query's text; its vector from embedding would go unused",
            "remove embedding:, or use search: nearVector or hybrid",
            "search",
        )
    if search in ("nearVector", "nearText") and config.text_field is not None:
        raise _fix(
            f"text_field limits a bm25 or hybrid search; {search} does not read it",
            "remove text_field:",
            "text_field",
        )


def check_vespa(config: TargetConfig) -> None:
    """YQL-safe names, and the tensor field of a nearestNeighbor search with an embedding."""
    for field, value in (
        ("collection", config.collection),
        ("vector_field", config.vector_field),
        ("query_tensor", config.query_tensor),
    ):
        if value is not None and not NAME.fullmatch(value):
            raise _fix(
                f"{value!r} is not a Vespa name",
                "write letters, digits and _ only, not starting with a digit",
                field,
            )
    if config.embedding is None:
        return  # a text search: userQuery() over text_field, or the default fieldset
    if config.vector_field is None:
        raise _fix(
            "a nearestNeighbor search needs vector_field (the tensor field of the schema)",
            "add vector_field: embedding, or remove embedding: for a text search",
        )
    if config.text_field is not None:
        raise _fix(
            "text_field and embedding are both set: one search, nearestNeighbor or text",
            "remove text_field: for nearestNeighbor, or embedding: for a text search",
        )


def check_rushdb(config: TargetConfig) -> None:
    """The label and the property whose embedding index is searched."""
    missing = [
        (field, example)
        for field, value, example in (
            ("collection", config.collection, "DOC_CHUNK (the label)"),
            ("text_field", config.text_field, "text (the property with an embedding index)"),
        )
        if value is None
    ]
    if missing:
        raise _fix(
            f"the rushdb preset needs {' and '.join(field for field, _ in missing)}",
            "add " + ", ".join(f"{field}: {example}" for field, example in missing),
        )


PRESET_CHECKS: dict[str, Callable[[TargetConfig], None]] = {
    "weaviate": check_weaviate,
    "vespa": check_vespa,
    "rushdb": check_rushdb,
    "pgvector": check_pgvector,
}
