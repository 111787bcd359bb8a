"""Targets that speak a vector database's own API, chosen by a target's ``preset:``.

Each preset is an ``HttpTarget`` that builds the database's native query from the canary's
vector and turns the database's answer into ranked hits; timeouts, retries, size caps,
redirect rules and redaction are ``HttpTarget``'s. pgvector, which speaks SQL, is its own
``PgvectorTarget``; both are a ``PresetTarget``. A preset that can fetch records by id also
says which relevant ids its index no longer holds (``missing``; ``lookup.py``), and one that
can fetch their vectors, or compute their distance itself, gives their exact scores
(``scores``) for the diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.measure.fingerprint import IndexState
from ragcanary.probe.presets.chroma import ChromaTarget
from ragcanary.probe.presets.milvus import MilvusTarget
from ragcanary.probe.presets.pinecone import PineconeTarget
from ragcanary.probe.presets.qdrant import QdrantTarget
from ragcanary.probe.presets.rushdb import RushDBTarget
from ragcanary.probe.presets.search_engines import SearchEngineTarget
from ragcanary.probe.presets.vespa import VespaTarget
from ragcanary.probe.presets.weaviate import WeaviateTarget
from ragcanary.probe.target import HttpTarget, Target
from ragcanary.redact import Redactor

if TYPE_CHECKING:
    from ragcanary.probe.presets.pgvector import PgvectorTarget


class PresetTarget(Target, Protocol):
    """A target made from its config: it also shows its last request, looks ids up in its
    index, and releases what it holds."""

    def describe_last_request(self) -> str:
        """The last request as `validate --live` prints it, secrets masked."""
        ...

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` the index does not hold; None when this target cannot tell
        (the generic http target, an ``id:`` its API cannot look up, a failed lookup).
        Never raises."""
        ...

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        """Each held id's exact score for ``vector`` as the target's search scores it (an id
        with several chunks: its best); ids not held are left out; None when this target
        cannot tell. Never raises."""
        ...

    async def index_state(self) -> IndexState:
        """What the index says of itself cheaply: its record count and search settings, each
        None when this target cannot tell. May raise ``QueryFailed`` (or anything else)."""

    async def texts(self, ids: Sequence[str]) -> dict[str, str] | None:
        """Each id's document text, for a judge; ids not found are left out; None when this
        target cannot fetch texts. Never raises."""
        ...

    async def aclose(self) -> None:
        """Release what the target opened itself (a SQL target's connections)."""
        ...


class TargetMaker(Protocol):
    """Builds a preset's target; HTTP presets use ``client``, others may ignore it."""

    def __call__(
        self,
        name: str,
        config: TargetConfig,
        client: httpx.AsyncClient,
        *,
        redact: Redactor | None,
    ) -> PresetTarget: ...


def _sql_target(
    name: str, config: TargetConfig, client: httpx.AsyncClient, *, redact: Redactor | None
) -> PgvectorTarget:
    """pgvector speaks SQL on its own connections: the HTTP client is not used.

    Imported here: SQLAlchemy would otherwise be a fifth of every `ragcanary run`'s start-up.
    """
    from ragcanary.probe.presets.pgvector import PgvectorTarget

    return PgvectorTarget(name, config, redact=redact)


PRESETS: dict[str, TargetMaker] = {
    "http": HttpTarget,
    "chroma": ChromaTarget,
    "qdrant": QdrantTarget,
    "milvus": MilvusTarget,
    "pinecone": PineconeTarget,
    "elasticsearch": SearchEngineTarget,
    "opensearch": SearchEngineTarget,
    "pgvector": _sql_target,
    "weaviate": WeaviateTarget,
    "vespa": VespaTarget,
    "rushdb": RushDBTarget,
}


def make_target(
    name: str,
    config: TargetConfig,
    client: httpx.AsyncClient,
    redact: Redactor | None = None,
) -> PresetTarget:
    """The adapter for ``config.preset``: the generic ``HttpTarget`` or a database's own."""
    return PRESETS[config.preset](name, config, client, redact=redact)
