"""Exact scores for the diagnosis: which ids are scored, and Chroma's distances from stored
vectors (its HTTP API answered by ``httpx.MockTransport``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from factories import answer, case

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.evidence import index_evidence
from ragcanary.probe.presets import make_target
from ragcanary.probe.presets.lookup import PAGE

pytestmark = pytest.mark.anyio
AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Index:
    """An index that holds every id but ``gone`` and scores each by its length."""

    def __init__(self, gone: set[str], scores: bool = True) -> None:
        self.gone, self.can_score = gone, scores
        self.asked: list[tuple[list[str], list[float]]] = []

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        return set(ids) & self.gone

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        self.asked.append((list(ids), list(vector)))
        return {doc: float(len(doc)) for doc in ids} if self.can_score else None


def _run(answers: dict[str, list[str]], vectors: bool = True, run_id: str = "r") -> RunResult:
    results = tuple(
        CaseResult(case(c, ["doc", "long-doc"]), answer(ids), (1.0, 0.0) if vectors else None)
        for c, ids in answers.items()
    )
    return RunResult("core", "search", run_id, AT, 0.1, results)


async def test_only_held_ids_that_left_are_scored_with_their_canarys_vector() -> None:
    baseline = _run({"c1": ["doc", "long-doc"], "c2": ["doc"], "c3": ["doc"]}, run_id="b")
    now = _run({"c1": ["x"], "c2": ["x"], "c3": ["doc"]})
    index = Index(gone={"long-doc"})
    found = await index_evidence(index, now, baseline, lambda: AT)
    assert found.gone == {"long-doc"}
    assert index.asked == [(["doc"], [1.0, 0.0]), (["doc"], [1.0, 0.0])]  # c1 and c2; c3 kept it
    assert found.exact == {"c1": {"doc": 3.0}, "c2": {"doc": 3.0}}
    assert found.at == AT


async def test_without_query_vectors_or_scores_the_evidence_has_no_exact_scores() -> None:
    baseline = _run({"c1": ["doc"]}, run_id="b")
    unscored = await index_evidence(Index(set(), scores=False), _run({"c1": []}), baseline)
    assert unscored.exact is None
    by_text = Index(set())
    found = await index_evidence(by_text, _run({"c1": []}, vectors=False), baseline)
    assert (found.exact, by_text.asked) == (None, [])


def _chroma(space: dict[str, Any], records: list[tuple[str, str, list[float]]], id_path: str):
    """A Chroma target on a MockTransport whose collection holds ``records`` (record id,
    doc_id metadata, vector), with ``space`` as its collection JSON; and the bodies of its
    ``get`` requests."""
    gets: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"id": "c-1", "name": "docs", **space})
        body = json.loads(request.content)
        gets.append(body)
        if "ids" in body:
            rows = [r for r in records if r[0] in body["ids"]]
        else:
            wanted = body["where"]["doc_id"]["$in"]
            matched = [r for r in records if r[1] in wanted]
            rows = matched[body["offset"] : body["offset"] + body["limit"]]
        return httpx.Response(
            200,
            json={
                "ids": [r[0] for r in rows],
                "embeddings": [r[2] for r in rows],
                "metadatas": [{"doc_id": r[1]} for r in rows],
            },
        )

    config = TargetConfig(
        preset="chroma",
        url="http://chroma.test",
        collection="docs",
        id=id_path,
        retries=0,
        embedding="toy",
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return make_target("kb", config, client), gets


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        ({"configuration_json": {"hnsw": {"space": "cosine"}}}, 1 - 0.6),
        ({"configuration_json": {"hnsw": {"space": "ip"}}}, 1 - 0.6),
        ({"configuration_json": {"hnsw": {"space": "l2"}}}, 0.8),
        ({"metadata": {"hnsw:space": "cosine"}}, 1 - 0.6),  # legacy: no configuration
        ({}, 0.8),  # Chroma's default, l2
    ],
)
async def test_chroma_scores_an_id_by_its_collections_own_distance(
    space: dict[str, Any], expected: float
) -> None:
    target, _ = _chroma(space, [("r1", "d1", [0.6, 0.8]), ("r2", "d2", [0.0, 1.0])], "id")
    got = await target.scores(["r1", "gone"], [1.0, 0.0])
    assert got is not None
    assert set(got) == {"r1"}
    assert math.isclose(got["r1"], expected, abs_tol=1e-12)


async def test_chroma_scores_a_document_by_its_nearest_chunk_across_pages() -> None:
    far = [(f"r{n}", "d1", [0.0, 1.0]) for n in range(PAGE)]
    records = [*far, ("near", "d1", [1.0, 0.0]), ("o", "d2", [0.6, 0.8])]
    cosine = {"configuration_json": {"hnsw": {"space": "cosine"}}}
    target, gets = _chroma(cosine, records, "metadata.doc_id")
    got = await target.scores(["d1", "d2"], [1.0, 0.0])
    assert got == pytest.approx({"d1": 0.0, "d2": 0.4}, abs=1e-12)
    assert [body["offset"] for body in gets] == [0, PAGE]  # the chunk on the second page counts


async def test_chroma_cannot_score_in_a_space_it_does_not_know() -> None:
    target, gets = _chroma({"configuration_json": {"hnsw": {"space": "hamming"}}}, [], "id")
    assert await target.scores(["r1"], [1.0, 0.0]) is None
    assert gets == []
