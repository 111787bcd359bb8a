"""Elasticsearch's and OpenSearch's kNN ``_score``, recomputed exactly by a ``script_score``.

A kNN search turns the field's similarity into a ``_score`` of its own (Elasticsearch:
``dense_vector`` ``similarity``; OpenSearch: ``knn_vector`` ``space_type``); the script here
gives each document the score the kNN search would give it, computed over every document it
is asked about, so that a lost id's exact score compares with the returned ones.

Elasticsearch (``dense_vector`` docs, float vectors): cosine ``(1 + cos) / 2``, dot_product
``(1 + dot) / 2``, l2_norm ``1 / (1 + l2²)``, max_inner_product ``1 / (1 - dot)`` below zero
and ``dot + 1`` from zero up. OpenSearch (k-NN "Spaces"): the ``knn_score`` script scores l2,
l1, linf and innerproduct as the approximate search does; cosinesimil it scores ``1 + cos``,
which the Lucene engine's search halves (``(1 + cos) / 2``), while the nmslib and faiss
engines' scale has changed between versions: those cannot be told, nor a vector type or
model this does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Painless over the field's own doc values; ``{f}`` is the field as a string literal. Each
# calls its vector function once, as Elasticsearch's docs ask.
ELASTICSEARCH_SCRIPTS = {
    "cosine": "(1.0 + cosineSimilarity(params.query_vector, {f})) / 2.0",
    "dot_product": "(1.0 + dotProduct(params.query_vector, {f})) / 2.0",
    "l2_norm": "double d = l2norm(params.query_vector, {f}); return 1.0 / (1.0 + d * d);",
    "max_inner_product": (
        "double d = dotProduct(params.query_vector, {f}); return d < 0 ? 1.0 / (1.0 - d) : d + 1.0;"
    ),
}
# OpenSearch spaces whose knn_score equals the approximate search's _score, in every engine.
SAME_SCALE = ("l2", "l1", "linf", "innerproduct")


@dataclass(frozen=True)
class ExactScore:
    """A ``script_score`` script for one query vector, and the kNN ``_score`` of its score."""

    script: dict[str, Any]
    as_knn: Callable[[float], float] = float


def exact_score(preset: str, spec: Any, field: str, vector: Sequence[float]) -> ExactScore | None:
    """The script for the field whose mapping is ``spec``; None when its kNN score cannot be
    known (an unknown similarity or space, byte or binary vectors, another engine's scale)."""
    if not isinstance(spec, dict):
        return None
    if preset == "elasticsearch":
        return _elasticsearch(spec, field, list(vector))
    return _opensearch(spec, field, list(vector))


def _elasticsearch(spec: dict[str, Any], field: str, vector: list[float]) -> ExactScore | None:
    if spec.get("type") != "dense_vector" or spec.get("element_type", "float") != "float":
        return None
    source = ELASTICSEARCH_SCRIPTS.get(str(spec.get("similarity")))
    if source is None:
        return None
    painless = {"source": source.format(f=_painless_string(field))}
    return ExactScore({**painless, "params": {"query_vector": vector}})


def _opensearch(spec: dict[str, Any], field: str, vector: list[float]) -> ExactScore | None:
    if spec.get("type") != "knn_vector" or spec.get("data_type", "float") != "float":
        return None
    given = spec.get("method")
    method: dict[str, Any] = given if isinstance(given, dict) else {}
    space = spec.get("space_type") or method.get("space_type")
    params = {"field": field, "query_value": vector, "space_type": space}
    script = {"source": "knn_score", "lang": "knn", "params": params}
    if space in SAME_SCALE:
        return ExactScore(script)
    if space == "cosinesimil" and method.get("engine") == "lucene":
        return ExactScore(script, lambda score: score / 2.0)
    return None


def _painless_string(text: str) -> str:
    """A Painless string literal: quotes and backslashes escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
