"""What a judge answers: a grade per document, the ``Grader`` seam, and a judge's fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragcanary.config.credentials import without_credentials
from ragcanary.config.judges import JudgeConfig

MAX_GRADE = 3
GRADES = range(MAX_GRADE + 1)


@dataclass(frozen=True)
class Document:
    """A document to grade: its id and its text."""

    id: str
    text: str


@dataclass(frozen=True)
class Graded:
    """The judge's grade of one document (0-3), or why it gave none (``refusal``)."""

    id: str
    grade: int | None
    score: float | None = None  # a reranker's relevance score, as it answered
    refusal: str | None = None  # unparseable: the judge answered, but no grade 0-3


class Grader(Protocol):
    """One judge, asked for the grades of documents for one query."""

    name: str
    fingerprint: str

    async def grade(self, query: str, documents: Sequence[Document]) -> list[Graded]:
        """One ``Graded`` per document, in order; ``QueryFailed`` when the request failed."""
        ...


def fingerprint(config: JudgeConfig, version: str) -> str:
    """What a grade depends on, as a short stable text: the kind, the endpoint (without
    credentials or headers, which hold secrets), the model and ``version`` (the prompt's
    version, or the score mapping's)."""
    basis = {
        "kind": config.kind,
        "url": without_credentials(config.url),
        "model": config.model,
        "version": version,
    }
    text = json.dumps(basis, sort_keys=True, separators=(",", ":"))
    return f"{config.kind}:{version}:{hashlib.sha256(text.encode()).hexdigest()[:12]}"
