"""Canary queries turned into vectors by an OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ragcanary.config.credentials import as_basic_auth, credential_secrets
from ragcanary.config.model import EmbeddingConfig
from ragcanary.probe.json_post import post_json, refusal
from ragcanary.probe.retries import QueryFailed, Retrying, RetrySettings
from ragcanary.probe.target import http_client
from ragcanary.redact import Redactor

# An endpoint that computes vectors is slower to recover than a search: a longer first wait.
BACKOFF_BASE_S = 0.5


@dataclass(frozen=True)
class Embedded:
    """One query's vector, or why there is none; ``latency_s`` is its batch's request time."""

    vector: tuple[float, ...] | None
    latency_s: float
    error: str | None = None
    unreachable: bool = False  # the endpoint was down, slow or overloaded, not misconfigured


def make_embedding_client(config: EmbeddingConfig) -> httpx.AsyncClient:
    """The client for one endpoint: its TLS setting, our User-Agent, and no redirects.

    An embeddings endpoint has no reason to redirect, and following one would carry its
    API key to wherever it points.
    """
    return http_client(config.verify_tls, config.timeout)


async def open_embedder(
    stack: AsyncExitStack, name: str, config: EmbeddingConfig, redact: Redactor | None
) -> Embedder:
    """An ``Embedder`` for endpoint ``name`` whose client ``stack`` closes."""
    client = await stack.enter_async_context(make_embedding_client(config))
    return Embedder(name, config, client, redact=redact)


class Embedder:
    """Embeds texts in batches of ``config.batch``; a failed batch fails only its own texts."""

    def __init__(
        self,
        name: str,
        config: EmbeddingConfig,
        client: httpx.AsyncClient,
        *,
        redact: Redactor | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
        jitter: Callable[[], float] = random.random,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``wall_clock`` is only used to read Retry-After dates."""
        self.name = name
        self._config = config
        self._client = client
        self._wall_clock = wall_clock
        # `retries` more after a timeout, connection error, 408, 429 or 5xx.
        self._retrying = Retrying(
            RetrySettings(config.retries, BACKOFF_BASE_S), sleep=sleep, jitter=jitter, clock=clock
        )
        # user:password@ in the URL goes as Authorization: Basic, off the URL (aiohttp
        # refuses both at once), and is a secret like the headers' values.
        self._url, self._headers = as_basic_auth(config.url, config.headers)
        own = [v for v in config.headers.values() if v] + credential_secrets(config.url)
        self._redact = (redact or Redactor(())).including(own)

    async def embed(self, texts: Sequence[str]) -> list[Embedded]:
        """One ``Embedded`` per text, in order; never raises for what the endpoint does."""
        out: list[Embedded] = []
        size = self._config.batch
        for start in range(0, len(texts), size):
            out.extend(await self._batch(texts[start : start + size]))
        return out

    async def _batch(self, texts: Sequence[str]) -> list[Embedded]:
        try:
            vectors, latency = await self._retrying.timed(lambda: self._request(texts))
        except QueryFailed as failure:
            reason = self._redact(f"embedding {self.name}: {failure.counted}")
            return [Embedded(None, failure.latency_s, reason, failure.transient) for _ in texts]
        return [Embedded(v, latency) for v in vectors]

    async def _request(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        config = self._config
        body: dict[str, Any] = {"model": config.model, "input": list(texts)}
        if config.dimensions is not None:
            body["dimensions"] = config.dimensions
        answer = await post_json(
            self._client,
            self._url,
            body,
            self._headers,
            timeout_s=config.timeout,
            max_bytes=config.max_response_bytes,
            refused=lambda response: refusal(
                response, self._wall_clock(), _hint(response.status_code)
            ),
        )
        return _vectors(answer, len(texts), config.dimensions)


def _hint(status: int) -> str:
    if status in (401, 403):
        return ": the endpoint refused the credentials (check headers: Authorization)"
    if status == 404:
        return ": no embeddings endpoint at this url (it usually ends in /v1/embeddings)"
    return ""


def _vectors(answer: Any, count: int, dimensions: int | None) -> list[tuple[float, ...]]:
    """The ``count`` vectors of an OpenAI-style answer, in input order, checked for shape."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise QueryFailed("bad_response", f"expected {count} embeddings under data, got {got}")
    ordered: list[tuple[float, ...] | None] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
            raise QueryFailed(
                "bad_response", f"data[{position}].index is missing, repeated or out of range"
            )
        if not isinstance(vector, list) or not vector:
            raise QueryFailed(
                "bad_response", f"data[{position}].embedding is not a list of numbers"
            )
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in vector
        ):
            raise QueryFailed(
                "bad_response", f"data[{position}].embedding holds a value that is not a number"
            )
        ordered[index] = tuple(float(x) for x in vector)
    vectors = [v for v in ordered if v is not None]
    sizes = {len(v) for v in vectors}
    if len(sizes) > 1:
        raise QueryFailed(
            "bad_response", f"embeddings of different dimensions in one answer: {sorted(sizes)}"
        )
    if dimensions is not None and sizes != {dimensions}:
        raise QueryFailed(
            "bad_response",
            f"embeddings have {sizes.pop()} dimensions, the config says dimensions: {dimensions}",
        )
    return vectors
