"""A ``/rerank`` endpoint as a judge (Cohere, Jina, TEI's Cohere-compatible route, vLLM).

Asked ``POST {url} {"model", "query", "documents", "top_n"}`` with every document of one
query at once, it answers ``{"results": [{"index", "relevance_score"}, ...]}``. A relevance
score becomes a grade by ``grade_of_score``: below ``min_grade_score`` grade 0 (not
relevant); from ``min_grade_score`` up to 1 the range is cut in three equal parts, grades 1,
2 and 3 (a score above 1 is grade 3). With the default 0.5: [0.5, 0.667) is 1,
[0.667, 0.833) is 2, 0.833 and above 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from ragcanary.config.judges import JudgeConfig
from ragcanary.probe.graders.exchange import JudgeExchange
from ragcanary.probe.graders.grades import MAX_GRADE, Document, Graded, fingerprint
from ragcanary.probe.retries import QueryFailed
from ragcanary.redact import Redactor

MAPPING_VERSION = "score-thirds-v1"


def grade_of_score(score: float, min_grade_score: float) -> int:
    """The grade 0-3 of a relevance score (see the module)."""
    if score < min_grade_score:
        return 0
    step = (1.0 - min_grade_score) / MAX_GRADE
    return min(MAX_GRADE, 1 + int((score - min_grade_score) / step))


class RerankGrader:
    """Grades a query's documents with one ``/rerank`` request."""

    def __init__(
        self,
        name: str,
        config: JudgeConfig,
        client: httpx.AsyncClient,
        *,
        redact: Redactor | None = None,
        exchange: JudgeExchange | None = None,
    ) -> None:
        self.name = name
        self._config = config
        self._exchange = exchange or JudgeExchange(config, client, redact=redact)
        # The mapping of scores to grades is part of what a grade means.
        version = f"{MAPPING_VERSION}-min{config.min_grade_score:g}"
        self.fingerprint = fingerprint(config, version)

    async def grade(self, query: str, documents: Sequence[Document]) -> list[Graded]:
        if not documents:
            return []
        body = {
            "model": self._config.model,
            "query": query,
            "documents": [d.text for d in documents],
            "top_n": len(documents),
        }
        scores = _scores(await self._exchange.post(body), len(documents))
        out = []
        for position, document in enumerate(documents):
            score = scores.get(position)
            if score is None:
                out.append(Graded(document.id, None, refusal="the judge returned no score for it"))
                continue
            out.append(
                Graded(document.id, grade_of_score(score, self._config.min_grade_score), score)
            )
        return out


def _scores(answer: Any, count: int) -> dict[int, float]:
    """Each document's relevance score by its index; ``QueryFailed`` for an answer that is
    not the ``/rerank`` shape."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise QueryFailed("bad_response", "the answer has no results list (the /rerank shape)")
    scores: dict[int, float] = {}
    for position, item in enumerate(results):
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score") if isinstance(item, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise QueryFailed(
                "bad_response", f"results[{position}].index is missing or out of range"
            )
        if index in scores:
            raise QueryFailed("bad_response", f"results[{position}].index {index} is repeated")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise QueryFailed("bad_response", f"results[{position}].relevance_score is no number")
        scores[index] = float(score)
    return scores
