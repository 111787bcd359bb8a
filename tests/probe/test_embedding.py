"""The embedding client: batches, order, shape checks, retries and errors that say the fix."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from ragcanary.config.model import EmbeddingConfig
from ragcanary.probe.embedding import Embedder

URL = "http://embedder.test/v1/embeddings"
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_sleep(_: float) -> None:
    return None


def _vector(text: str, size: int = 3) -> list[float]:
    return [float(len(text)), float(ord(text[0])), 1.0][:size] + [0.5] * max(0, size - 3)


def _answer(body: dict[str, Any], size: int = 3) -> dict[str, Any]:
    data = [{"index": i, "embedding": _vector(t, size)} for i, t in enumerate(body["input"])]
    return {"data": list(reversed(data))}


def _embedder(
    handler: Any, sleep: Any = _no_sleep, **config: Any
) -> tuple[Embedder, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    settings = EmbeddingConfig(**({"url": URL, "model": "toy", "retries": 0} | config))
    embedder = Embedder(
        "minilm", settings, client, sleep=sleep, jitter=lambda: 0.5, wall_clock=lambda: NOW
    )
    return embedder, client


class Sleeps:
    """An injected sleep that records every delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _failing_then_answering(*failures: httpx.Response) -> Any:
    """A handler that answers with ``failures`` in turn, then with the vectors asked for."""
    left = list(failures)

    def handler(request: httpx.Request) -> httpx.Response:
        if left:
            return left.pop(0)
        return httpx.Response(200, json=_answer(json.loads(request.content)))

    return handler


async def test_texts_go_in_batches_and_come_back_in_input_order() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json=_answer(body))

    embedder, client = _embedder(handler, batch=2, headers={"Authorization": "Bearer k-1"})
    async with client:
        texts = ["a", "bb", "ccc", "dddd", "eeeee"]
        out = await embedder.embed(texts)
    assert [b["input"] for b in bodies] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert all(b["model"] == "toy" and "dimensions" not in b for b in bodies)
    assert [e.vector for e in out] == [tuple(_vector(t)) for t in texts]
    assert all(e.error is None for e in out)


async def test_dimensions_are_sent_and_an_answer_of_another_size_fails() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        return httpx.Response(200, json=_answer(body, size=4))

    embedder, client = _embedder(handler, dimensions=3)
    async with client:
        (out,) = await embedder.embed(["q"])
    assert sent[0]["dimensions"] == 3
    assert out.vector is None
    assert out.error is not None
    assert "4 dimensions, the config says dimensions: 3" in out.error


async def test_a_transient_failure_is_retried_then_succeeds() -> None:
    statuses = iter([503, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(statuses)
        body = json.loads(request.content)
        return httpx.Response(status, json=_answer(body) if status == 200 else {})

    embedder, client = _embedder(handler, retries=1)
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.vector == tuple(_vector("q"))


@pytest.mark.parametrize(
    ("failure", "expected_sleep"),
    [
        pytest.param(httpx.Response(429, headers={"Retry-After": "7"}), 7.0, id="429-seconds"),
        pytest.param(
            httpx.Response(
                503,
                headers={
                    "Retry-After": (NOW + timedelta(seconds=12)).strftime(
                        "%a, %d %b %Y %H:%M:%S GMT"
                    )
                },
            ),
            12.0,
            id="503-date",
        ),
        pytest.param(httpx.Response(429, headers={"Retry-After": "3600"}), 30.0, id="capped"),
        pytest.param(httpx.Response(429, headers={"Retry-After": "soon"}), 0.5, id="unreadable"),
        pytest.param(httpx.Response(500, headers={"Retry-After": "7"}), 0.5, id="not-429-503"),
    ],
)
async def test_retry_after_is_honoured_and_capped_like_a_target_s(
    failure: httpx.Response, expected_sleep: float
) -> None:
    """A 429 or 503 says when to ask again (seconds or a date), capped at 30 s; without a
    readable one the embedder's own backoff applies (0.5 s first)."""
    sleeps = Sleeps()
    embedder, client = _embedder(_failing_then_answering(failure), sleep=sleeps, retries=1)
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.vector == tuple(_vector("q"))
    assert sleeps.delays == [pytest.approx(expected_sleep)]


@pytest.mark.parametrize(
    ("status", "retried"),
    [(status, True) for status in (408, 429, 500, 501, 504, 599)]
    + [(status, False) for status in (400, 401, 404, 422, 204, 302)],
)
async def test_a_timeout_408_429_or_any_5xx_is_retried_and_unreachable_and_nothing_else(
    status: int, retried: bool
) -> None:
    """The documented set (docs/config.md, embeddings ``retries``); what is retried and still
    fails says the endpoint is unreachable, not misconfigured."""
    sleeps = Sleeps()
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={})

    embedder, client = _embedder(handler, sleep=sleeps, retries=2)
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.error is not None
    assert out.error.startswith(f"embedding minilm: HTTP {status}")
    assert out.unreachable is retried
    if retried:
        assert (len(seen), sleeps.delays) == (3, [pytest.approx(0.5), pytest.approx(1.0)])
        assert out.error.endswith("(after 3 attempts)")
    else:
        assert (len(seen), sleeps.delays) == (1, [])


async def test_a_batch_s_latency_is_its_last_attempt_s() -> None:
    """As a target's answer: earlier attempts and the wait between them do not count."""
    ticks = iter([0.0, 1.0, 50.0, 50.25])
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(_failing_then_answering(httpx.Response(502)))
    )
    settings = EmbeddingConfig(url=URL, model="toy", retries=1)
    embedder = Embedder("minilm", settings, client, sleep=_no_sleep, clock=lambda: next(ticks))
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.vector is not None
    assert out.latency_s == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        pytest.param(httpx.Response(401, json={}), "check headers: Authorization", id="401"),
        pytest.param(httpx.Response(404, json={}), "ends in /v1/embeddings", id="404"),
        pytest.param(httpx.Response(200, content=b"<html>"), "not JSON", id="html"),
        pytest.param(
            httpx.Response(200, content=b"[" * 100_000 + b"]" * 100_000),
            "nested deeper than the JSON decoder follows",
            id="deeply-nested",
        ),
        pytest.param(httpx.Response(200, json={"data": []}), "expected 2 embeddings", id="count"),
        pytest.param(
            httpx.Response(
                200,
                json={"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
            ),
            "repeated",
            id="same-index",
        ),
        pytest.param(
            httpx.Response(
                200,
                json={
                    "data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1, 2]}]
                },
            ),
            "different dimensions",
            id="ragged",
        ),
        pytest.param(
            httpx.Response(
                200,
                json={"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [1.0]}]},
            ),
            "not a number",
            id="not-numbers",
        ),
    ],
)
async def test_a_failed_batch_fails_each_of_its_texts_with_the_reason(
    response: httpx.Response, reason: str
) -> None:
    embedder, client = _embedder(lambda request: response)
    async with client:
        out = await embedder.embed(["first", "second"])
    assert [e.vector for e in out] == [None, None]
    assert all(e.error is not None and reason in e.error for e in out)
    assert all(e.error is not None and e.error.startswith("embedding minilm: ") for e in out)


async def test_a_timeout_is_a_reason_not_an_exception() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    embedder, client = _embedder(handler, retries=2)
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.error is not None
    assert "no answer within 10s (after 3 attempts)" in out.error


async def test_an_answer_over_the_size_cap_is_refused_unread() -> None:
    embedder, client = _embedder(
        lambda request: httpx.Response(200, content=b"x" * 5000), max_response_bytes=1000
    )
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.error is not None
    assert "larger than max_response_bytes (1000)" in out.error


async def test_the_api_key_never_appears_in_a_reason() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused with {request.headers['Authorization']}")

    embedder, client = _embedder(handler, headers={"Authorization": "Bearer sk-secret-77"})
    async with client:
        (out,) = await embedder.embed(["q"])
    assert out.error is not None
    assert "sk-secret-77" not in out.error


async def test_url_credentials_go_as_basic_auth_and_the_password_is_never_shown() -> None:
    """``user:password@`` in the URL: sent as HTTP Basic (the password percent-decoded), off
    the URL; an answer that echoes it back shows neither it nor the Basic token."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(200, json=_answer(json.loads(request.content)))
        return httpx.Response(401, text=f"bad {request.headers['authorization']} p@ss-w0rd")

    url = URL.replace("http://", "http://svc:p%40ss-w0rd@")
    embedder, client = _embedder(handler, url=url)
    async with client:
        (good,) = await embedder.embed(["q"])
        (refused,) = await embedder.embed(["q"])
    token = base64.b64encode(b"svc:p@ss-w0rd").decode()
    assert good.vector is not None, good.error
    assert seen[0].headers["authorization"] == f"Basic {token}"
    assert str(seen[0].url) == URL
    assert refused.error is not None
    for shown in ("p@ss-w0rd", "p%40ss-w0rd", token):
        assert shown not in refused.error
