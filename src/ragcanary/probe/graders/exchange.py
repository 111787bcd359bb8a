"""One JSON request to a judge: within its deadline and size cap, retried on what may pass."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from ragcanary.config.credentials import as_basic_auth, credential_secrets
from ragcanary.config.judges import JudgeConfig
from ragcanary.probe.json_post import post_json, refusal
from ragcanary.probe.retries import QueryFailed, Retrying, RetrySettings
from ragcanary.redact import Redactor

# A model that grades is slower to recover than a search: a longer first wait.
BACKOFF_BASE_S = 0.5


class JudgeExchange:
    """POSTs JSON to one judge's url with its headers; ``retries`` more attempts after a
    timeout, connection error, 408, 429 or 5xx, then ``QueryFailed``."""

    def __init__(
        self,
        config: JudgeConfig,
        client: httpx.AsyncClient,
        *,
        redact: Redactor | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._config = config
        self._client = client
        self._wall_clock = wall_clock
        self._retrying = Retrying(
            RetrySettings(config.retries, BACKOFF_BASE_S), sleep=sleep, jitter=jitter
        )
        self._url, self._headers = as_basic_auth(config.url, config.headers)
        own = [v for v in config.headers.values() if v] + credential_secrets(config.url)
        self.redact = (redact or Redactor(())).including(own)

    async def post(self, body: Any) -> Any:
        """The JSON answer to ``body``, asked again while it fails transiently."""
        return await self._retrying.call(lambda: self._once(body))

    async def _once(self, body: Any) -> Any:
        config = self._config
        return await post_json(
            self._client,
            self._url,
            body,
            self._headers,
            timeout_s=config.timeout,
            max_bytes=config.max_response_bytes,
            refused=self._refused,
        )

    def _refused(self, response: httpx.Response) -> QueryFailed:
        """An answer other than 200; a 408 (the judge gave up waiting) counts as a timeout."""
        code = response.status_code
        hint = ": the judge refused the credentials (check headers:)" if code in (401, 403) else ""
        return refusal(response, self._wall_clock(), hint)
