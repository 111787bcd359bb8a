"""Judges that grade documents nobody labelled: a ``/rerank`` endpoint or a chat model.

``make_grader`` builds the ``Grader`` of a ``JudgeConfig``; ``Grader.grade`` asks it for the
grade (0 not relevant to 3 highly relevant) of each document for one query, and never raises
for what the judge does: a failure of the whole request raises ``QueryFailed`` (its outcome is
the counted reason; transient ones may be asked again by a later run), a document the judge
answered for without a usable grade comes back ``Graded`` with ``refusal`` set. The mapping of
scores to grades and the grading prompt are in ``rerank.py`` and ``chat.py``, and both enter
the judge's ``fingerprint``: a grade is cached by (document, query, fingerprint).
"""

from __future__ import annotations

import httpx

from ragcanary.config.judges import JudgeConfig
from ragcanary.probe.graders.chat import ChatGrader
from ragcanary.probe.graders.grades import Graded, Grader, fingerprint
from ragcanary.probe.graders.rerank import RerankGrader, grade_of_score
from ragcanary.probe.target import http_client
from ragcanary.redact import Redactor

__all__ = [
    "ChatGrader",
    "Graded",
    "Grader",
    "RerankGrader",
    "fingerprint",
    "grade_of_score",
    "make_grader",
    "make_judge_client",
]


def make_judge_client(config: JudgeConfig) -> httpx.AsyncClient:
    """The client of one judge: its TLS setting, our User-Agent, no redirects (a redirect
    would carry its API key wherever it points)."""
    return http_client(config.verify_tls, config.timeout)


def make_grader(
    name: str, config: JudgeConfig, client: httpx.AsyncClient, redact: Redactor | None = None
) -> Grader:
    """The grader of judge ``name``, asking on ``client``."""
    if config.kind == "rerank":
        return RerankGrader(name, config, client, redact=redact)
    return ChatGrader(name, config, client, redact=redact)
