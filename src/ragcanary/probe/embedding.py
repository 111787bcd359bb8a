"""Canary queries turned into vectors by an OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx

from ragcanary.config.credentials import as_basic_auth, credential_secrets
from ragcanary.config.model import EmbeddingConfig
from ragcanary.probe.responses import TooDeep, TooLarge, decode_json, read_capped
from ragcanary.probe.retries import QueryFailed, backoff_delay
from ragcanary.probe.target import http_client
from ragcanary.probe.transport import close
from ragcanary.redact import Redactor

# Statuses worth asking again: overload and the server's own trouble, as for targets.
_RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.5


@dataclass(frozen=True)
class Embedded:
    """One query's vector, or why there is none; ``latency_s`` is its batch's request time."""

    vector: tuple[float, ...] | None
    latency_s: float
    error: str | None = None
    unreachable: bool = False  # the endpoint was down, slow or overloaded, not misconfigured


class _Failed(Exception):
    def __init__(self, reason: str, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


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
    ) -> None:
        self.name = name
        self._config = config
        self._client = client
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
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
        attempts = self._config.retries + 1
        for attempt in range(1, attempts + 1):
            started = self._clock()
            try:
                vectors = await self._request(texts)
            except _Failed as failure:
                latency = self._clock() - started
                if failure.retry and attempt < attempts:
                    await self._sleep(backoff_delay(attempt - 1, self._jitter(), BACKOFF_BASE_S))
                    continue
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                reason = self._redact(f"embedding {self.name}: {failure.reason}{tries}")
                return [Embedded(None, latency, reason, failure.retry) for _ in texts]
            latency = self._clock() - started
            return [Embedded(v, latency) for v in vectors]
        raise AssertionError("unreachable: the last attempt returns")

    async def _request(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        config = self._config
        body: dict[str, Any] = {"model": config.model, "input": list(texts)}
        if config.dimensions is not None:
            body["dimensions"] = config.dimensions
        try:
            async with asyncio.timeout(config.timeout):
                request = self._client.build_request(
                    "POST", self._url, json=body, headers=self._headers
                )
                response = await self._client.send(request, stream=True)
                try:
                    if response.status_code != 200:
                        raise _Failed(
                            f"HTTP {response.status_code}{_hint(response.status_code)}",
                            response.status_code in _RETRIED_STATUS,
                        )
                    raw = await _read_capped(response, config.max_response_bytes)
                finally:
                    await close(response)
        except _Failed:
            raise
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise _Failed(f"no answer within {config.timeout:g}s", True) from exc
        except httpx.TransportError as exc:
            raise _Failed(f"connection failed: {type(exc).__name__}", True) from exc
        except httpx.HTTPError as exc:
            raise _Failed(f"unreadable response: {type(exc).__name__}", False) from exc
        return _vectors(raw, len(texts), config.dimensions)


def _hint(status: int) -> str:
    if status in (401, 403):
        return ": the endpoint refused the credentials (check headers: Authorization)"
    if status == 404:
        return ": no embeddings endpoint at this url (it usually ends in /v1/embeddings)"
    return ""


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """The target's capped reader (Content-Length and decoded size), in this client's words."""
    try:
        return await read_capped(response, limit)
    except TooLarge:
        raise _Failed(f"answer larger than max_response_bytes ({limit})", False) from None
    except QueryFailed as failure:  # an unreadable Content-Encoding
        raise _Failed(failure.reason, False) from None


def _vectors(raw: bytes, count: int, dimensions: int | None) -> list[tuple[float, ...]]:
    """The ``count`` vectors of an OpenAI-style answer, in input order, checked for shape."""
    try:
        answer = decode_json(raw)
    except TooDeep as exc:
        raise _Failed(f"the answer is {exc}", False) from exc
    except ValueError as exc:
        raise _Failed("the answer is not JSON", False) from exc
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise _Failed(f"expected {count} embeddings under data, got {got}", False)
    ordered: list[tuple[float, ...] | None] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
            raise _Failed(f"data[{position}].index is missing, repeated or out of range", False)
        if not isinstance(vector, list) or not vector:
            raise _Failed(f"data[{position}].embedding is not a list of numbers", False)
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in vector
        ):
            raise _Failed(f"data[{position}].embedding holds a value that is not a number", False)
        ordered[index] = tuple(float(x) for x in vector)
    vectors = [v for v in ordered if v is not None]
    sizes = {len(v) for v in vectors}
    if len(sizes) > 1:
        raise _Failed(f"embeddings of different dimensions in one answer: {sorted(sizes)}", False)
    if dimensions is not None and sizes != {dimensions}:
        raise _Failed(
            f"embeddings have {sizes.pop()} dimensions, the config says dimensions: {dimensions}",
            False,
        )
    return vectors
