"""One JSON POST to an endpoint that answers JSON (an embedding endpoint, a judge): within
its deadline and size cap, every way it can fail named as a query outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx

from ragcanary.measure.results import Outcome
from ragcanary.probe.responses import TooDeep, TooLarge, decode_json, read_capped
from ragcanary.probe.retries import QueryFailed, retry_after, status_outcome
from ragcanary.probe.transport import close


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: Any,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    max_bytes: int,
    refused: Callable[[httpx.Response], QueryFailed],
) -> Any:
    """The decoded JSON answer to ``body``, or ``QueryFailed``: ``refused`` of an answer other
    than 200, a timeout, a connection error, or a bad response (over ``max_bytes``, not JSON,
    nested too deep)."""
    try:
        async with asyncio.timeout(timeout_s):
            request = client.build_request("POST", url, json=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    raise refused(response)
                raw = await read_capped(response, max_bytes)
            finally:
                await close(response)
    except TooLarge:
        reason = f"answer larger than max_response_bytes ({max_bytes})"
        raise QueryFailed("bad_response", reason) from None
    except QueryFailed:
        raise
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise QueryFailed("timeout", f"no answer within {timeout_s:g}s") from exc
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


def refusal(response: httpx.Response, now: datetime, hint: str = "") -> QueryFailed:
    """The failure of an answer other than 200, with the wait a 429 or 503 asks for; a 408
    (the endpoint gave up waiting for the request) counts as a timeout, retried."""
    code = response.status_code
    outcome: Outcome = "timeout" if code == 408 else status_outcome(code)
    wait = retry_after(code, response.headers.get("retry-after"), now)
    return QueryFailed(outcome, f"HTTP {code}{hint}", wait)
