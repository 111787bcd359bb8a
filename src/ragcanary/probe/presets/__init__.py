"""Targets that speak a vector database's own API, chosen by a target's ``preset:``.

Each preset is an ``HttpTarget`` that builds the database's native query from the canary's
vector and turns the database's answer into ranked hits; timeouts, retries, size caps,
redirect rules and redaction are ``HttpTarget``'s.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from ragcanary.config.model import TargetConfig
from ragcanary.probe.presets.chroma import ChromaTarget
from ragcanary.probe.presets.milvus import MilvusTarget
from ragcanary.probe.presets.pinecone import PineconeTarget
from ragcanary.probe.presets.qdrant import QdrantTarget
from ragcanary.probe.presets.search_engines import SearchEngineTarget
from ragcanary.probe.target import HttpTarget

PRESETS: dict[str, type[HttpTarget]] = {
    "http": HttpTarget,
    "chroma": ChromaTarget,
    "qdrant": QdrantTarget,
    "milvus": MilvusTarget,
    "pinecone": PineconeTarget,
    "elasticsearch": SearchEngineTarget,
    "opensearch": SearchEngineTarget,
}


def make_target(
    name: str,
    config: TargetConfig,
    client: httpx.AsyncClient,
    redact: Callable[[str], str] = lambda s: s,
) -> HttpTarget:
    """The adapter for ``config.preset``: the generic ``HttpTarget`` or a database's own."""
    return PRESETS[config.preset](name, config, client, redact=redact)
