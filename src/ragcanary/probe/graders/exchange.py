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
from ragcanary.measure.results import Outcome
from ragcanary.probe.responses import TooDeep, TooLarge, decode_json, read_capped
from ragcanary.probe.retries import (
    QueryFailed,
    Retrying,
    RetrySettings,
    retry_after,
    status_outcome,
)
from ragcanary.probe.transport import close
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
        try:
            async with asyncio.timeout(config.timeout):
                request = self._client.build_request(
                    "POST", self._url, json=body, headers=self._headers
                )
                response = await self._client.send(request, stream=True)
                try:
                    if response.status_code != 200:
                        raise self._refused(response)
                    raw = await read_capped(response, config.max_response_bytes)
                finally:
                    await close(response)
        except TooLarge:
            reason = f"answer larger than max_response_bytes ({config.max_response_bytes})"
            raise QueryFailed("bad_response", reason) from None
        except QueryFailed:
            raise
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise QueryFailed("timeout", f"no answer within {config.timeout:g}s") from exc
        except httpx.TransportError as exc:
            reason = f"connection failed: {type(exc).__name__}"
            raise QueryFailed("connect_error", reason) from exc
        except httpx.HTTPError as exc:
            reason = f"unreadable response: {type(exc).__name__}"
            raise QueryFailed("bad_response", reason) from exc
        try:
            return decode_json(raw)
        except TooDeep as exc:
            raise QueryFailed("bad_response", f"the answer is {exc}") from exc
        except ValueError as exc:
            raise QueryFailed("bad_response", "the answer is not JSON") from exc

    def _refused(self, response: httpx.Response) -> QueryFailed:
        """An answer other than 200; a 408 (the judge gave up waiting) counts as a timeout."""
        code = response.status_code
        outcome: Outcome = "timeout" if code == 408 else status_outcome(code)
        wait = retry_after(code, response.headers.get("retry-after"), self._wall_clock())
        hint = ": the judge refused the credentials (check headers:)" if code in (401, 403) else ""
        return QueryFailed(outcome, f"HTTP {code}{hint}", wait)
