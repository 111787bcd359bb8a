"""A judge's settings (``judges:``): where it is, which model, and how much a run may ask.

A judge grades documents nobody labelled (docs/judgments.md): ``rerank`` is an endpoint in
the Cohere / Jina / TEI ``/rerank`` shape, ``chat`` an OpenAI-compatible
``/v1/chat/completions`` model. A suite names one with ``judge: NAME``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ragcanary.config.credentials import check_one_credential
from ragcanary.config.fields import Seconds, Strict
from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.target import http_url_problem, sendable_headers

_URL_EXAMPLES = {
    "rerank": "http://reranker:8080/rerank",
    "chat": "http://llm:8000/v1/chat/completions",
}


class JudgeConfig(Strict):
    """One judge: where it is, which model, and how much of it a run and a day may use."""

    kind: Literal["rerank", "chat"]
    url: str
    model: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: Seconds = 30.0
    retries: int = Field(default=2, ge=0, le=10)  # more attempts after a timeout or a 5xx
    max_per_run: int = Field(default=50, ge=1)  # documents graded after one run
    max_per_day: int | None = Field(default=None, ge=1)  # documents graded a UTC day
    # rerank: a relevance score below it is grade 0; [it, 1] is cut in thirds for 1, 2, 3.
    min_grade_score: float = Field(default=0.5, ge=0, lt=1)
    max_response_bytes: int = Field(default=10_000_000, ge=1)
    verify_tls: bool = True

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        problem = http_url_problem(url)
        if problem is not None:
            raise _fix(problem, f"write a full URL like {_URL_EXAMPLES['rerank']}")
        return url

    @field_validator("headers")
    @classmethod
    def _sendable(cls, headers: dict[str, str]) -> dict[str, str]:
        return sendable_headers(headers)

    @model_validator(mode="after")
    def _one_credential(self) -> JudgeConfig:
        check_one_credential(self.url, self.headers)
        return self
