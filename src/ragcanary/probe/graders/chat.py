"""An OpenAI-compatible chat model as a judge, asked with a fixed, versioned grading prompt.

One request per (query, document): the system message is ``PROMPT``, the user message the
query and the document's text (cut to ``MAX_DOCUMENT_CHARS``), at temperature 0. The answer's
``choices[0].message.content`` must be one digit 0-3 and nothing else but white space
(``parse_grade``); anything else (a refusal, an explanation, "2/3", "Grade: 2") is counted as
unparseable and never asked again under the same prompt. ``PROMPT_VERSION`` enters the judge's
fingerprint, so a new prompt grades again what the old one graded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import httpx

from ragcanary.config.judges import JudgeConfig
from ragcanary.probe.graders.exchange import JudgeExchange
from ragcanary.probe.graders.grades import Document, Graded, fingerprint
from ragcanary.probe.retries import QueryFailed
from ragcanary.redact import Redactor

PROMPT_VERSION = "grade-0-3-v1"
MAX_DOCUMENT_CHARS = 8000
PROMPT = """\
You judge search results. Given a search query and one document, grade how relevant the \
document is to the query:
3 = highly relevant: the document answers the query fully
2 = relevant: the document answers the query in part
1 = marginally relevant: the document is on the query's topic but does not answer it
0 = not relevant
Answer with the single digit of the grade and nothing else."""
_GRADE = re.compile(r"\s*([0-3])\s*")


def parse_grade(content: Any) -> int | None:
    """The grade in a model's answer when it is exactly one digit 0-3, else None."""
    if not isinstance(content, str):
        return None
    found = _GRADE.fullmatch(content)
    return int(found.group(1)) if found else None


def messages(query: str, text: str) -> list[dict[str, str]]:
    """The prompt for one document (``PROMPT_VERSION``)."""
    user = f"Query: {query}\n\nDocument:\n{text[:MAX_DOCUMENT_CHARS]}"
    return [{"role": "system", "content": PROMPT}, {"role": "user", "content": user}]


class ChatGrader:
    """Grades each document with one chat completion."""

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
        self.fingerprint = fingerprint(config, PROMPT_VERSION)

    async def grade(self, query: str, documents: Sequence[Document]) -> list[Graded]:
        """Each document in turn; a request that fails (after its retries) fails the rest
        too, which a later run asks again."""
        return [await self._one(query, document) for document in documents]

    async def _one(self, query: str, document: Document) -> Graded:
        body = {
            "model": self._config.model,
            "messages": messages(query, document.text),
            "temperature": 0,
            "max_tokens": 4,
        }
        content = _content(await self._exchange.post(body))
        grade = parse_grade(content)
        if grade is None:
            shown = self._exchange.redact(repr(content)[:80])
            return Graded(document.id, None, refusal=f"no grade 0-3 in the answer: {shown}")
        return Graded(document.id, grade)


def _content(answer: Any) -> Any:
    """``choices[0].message.content``; ``QueryFailed`` when the answer has no such field."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict) or "content" not in message:
        raise QueryFailed("bad_response", "the answer has no choices[0].message.content")
    return message["content"]
