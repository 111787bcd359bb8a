"""The incidents bench/detection.py injects, and the simulated index that suffers them.

Each canary keeps a pool of candidates with a "true" score (the demo BM25 index's). From the
injection on, the index may have deleted documents, re-ingested some under another id, lost
the approximate search's way to some (a degraded HNSW graph still holds them but its search
never reaches them), moved every stored score once (re-chunked or re-embedded documents), or
be searched with query vectors of another model than the one that embedded its documents.

The simulated index answers the questions the real probe asks for the diagnosis
(``ragcanary.probe.evidence.Index``) from its own state, as a database would, never from the
name of the incident: which ids it no longer holds, and, for a query vector, the exact score
of each id it holds, computed without the approximation its search suffers (the per-run
jitter, the documents the search cannot reach).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ragcanary.measure.results import Answer

DIMENSIONS = 32  # length of the stand-in query vectors
MODEL = "model-a"  # embedded the documents, and the queries until a swap
SWAPPED_MODEL = "model-b"  # the queries' model after a swap; the documents stay as they were
_DIGITS = 6  # scores are rounded as the demo retriever rounds them

Pool = tuple[list[str], npt.NDArray[np.float64]]  # a canary's candidates and true scores


def embed(model: str, text: str) -> tuple[float, ...]:
    """A stand-in query vector of unit length: the same for the same model and text, unrelated
    (cosine near 0) across models, as two embedding models' vectors are."""
    digest = hashlib.blake2b(f"{model}\n{text}".encode(), digest_size=8).digest()
    vector = np.random.default_rng(int.from_bytes(digest, "big")).normal(size=DIMENSIONS)
    return tuple(float(x) for x in vector / np.linalg.norm(vector))


def renamed(doc: str) -> str:
    """The id a re-ingestion stores ``doc`` under: upper-cased, as a migration that changed the
    id scheme's case would."""
    return doc.upper()


@dataclass(frozen=True)
class Incident:
    """What changed in the retriever from the injection on (nothing by default)."""

    shift: float = 0.0  # every score lowered by this
    deleted: frozenset[str] = frozenset()  # documents the index no longer holds
    renamed: frozenset[str] = frozenset()  # documents re-ingested under renamed(id)
    unreachable: frozenset[str] = frozenset()  # held, but the approximate search misses them
    # case -> a fixed offset per candidate of its pool: re-embedded documents, the same each run
    offsets: Mapping[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    model: str = MODEL  # the model that embeds the queries
    # case -> its pool's scores for a query embedded by another model than the documents':
    # unrelated to the query (its pool's own scores in a random order), fixed at the swap.
    foreign: Mapping[str, npt.NDArray[np.float64]] = field(default_factory=dict)


UNCHANGED = Incident()


class SimulatedIndex:
    """The simulated retriever's index after ``incident``: its approximate search, and its
    answers to the diagnosis's look-ups (the ``Index`` protocol of ``probe.evidence``)."""

    def __init__(
        self,
        truth: Mapping[str, Pool],
        incident: Incident,
        vectors: Mapping[tuple[str, str], tuple[float, ...]],
    ) -> None:
        """``vectors``: each (case, model)'s query vector."""
        self.truth, self.incident, self.vectors = truth, incident, vectors
        self._queries = {vector: key for key, vector in vectors.items()}

    def _unclipped(self, case: str, model: str) -> npt.NDArray[np.float64]:
        incident = self.incident
        _, true = self.truth[case]
        if model != MODEL:
            return incident.foreign[case] - incident.shift
        if case in incident.offsets:
            return true + incident.offsets[case] - incident.shift
        return true - incident.shift

    def exact(self, case: str, model: str) -> npt.NDArray[np.float64]:
        """Every candidate's score for ``case``'s query embedded by ``model``, as an exact
        search computes it: no jitter, every document reached."""
        return np.clip(self._unclipped(case, model), 0, 1)

    def search(
        self, case: str, rng: np.random.Generator, sigma: float, depth: int
    ) -> tuple[Answer, tuple[float, ...]]:
        """One canary's answer in one run, and the query vector it was searched with: the
        scores jittered (sd ``sigma``), re-sorted and cut to ``depth``; deleted and unreachable
        documents left out, re-ingested ones under their new ids."""
        incident = self.incident
        ids, _ = self.truth[case]
        away = incident.deleted | incident.unreachable
        keep = [i for i, doc in enumerate(ids) if doc not in away]
        moved = self._unclipped(case, incident.model)[keep]
        scores = np.clip(moved + rng.normal(0.0, sigma, len(keep)), 0, 1)
        # np.lexsort sorts by its last key first: score descending, ties in random order.
        order = np.lexsort((rng.random(len(keep)), -scores))[:depth]
        got = tuple(self._stored(ids[keep[i]]) for i in order)
        rounded = tuple(round(float(scores[i]), _DIGITS) for i in order)
        answer = Answer(got, rounded, 0.01, "ok" if got else "empty")
        return answer, self.vectors[case, incident.model]

    def _stored(self, doc: str) -> str:
        return renamed(doc) if doc in self.incident.renamed else doc

    def _holds(self, doc: str) -> bool:
        """Whether the index holds ``doc`` under that id (a re-ingested one: only its new id)."""
        return doc not in self.incident.deleted and doc not in self.incident.renamed

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` the index does not hold under that id."""
        return {doc for doc in ids if not self._holds(doc)}

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        """Each held id's exact score for ``vector`` (a vector it was never sent: None); the
        index scores every document, the simulation knows the scores of a canary's pool."""
        query = self._queries.get(tuple(vector))
        if query is None:
            return None
        case, model = query
        pool, _ = self.truth[case]
        wanted = {doc for doc in ids if self._holds(doc)}
        return {
            doc: round(float(score), _DIGITS)
            for doc, score in zip(pool, self.exact(case, model), strict=True)
            if doc in wanted
        }
