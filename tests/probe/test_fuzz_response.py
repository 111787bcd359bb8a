"""Fuzzing what a target answers: any status, headers and body give an Answer, never a crash."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import zlib
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import OUTCOMES, Answer
from ragcanary.probe.target import HttpTarget

SECRET = "tok-9f3a7c1e5b2d4f6a8c0e"
ECHO = "<<echo>>"  # replaced in a body by the Authorization header the request carried
URL = "http://retriever.test/search"
FUZZ = settings(max_examples=200, deadline=None)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=8),
    # The echoed credential at any offset, so that it straddles wherever a message is cut.
    st.integers(0, 130).map(lambda n: "p" * n + ECHO),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
# The configured paths (data.hits, meta.id, score) with anything at each step of them.
hit = (
    st.fixed_dictionaries(
        {}, optional={"meta": st.fixed_dictionaries({}, optional={"id": json_values}) | json_values}
    )
    | json_values
)
hit = st.builds(lambda h, s: {**h, "score": s} if isinstance(h, dict) else h, hit, json_values)
documents = st.one_of(
    json_values,
    st.fixed_dictionaries({"data": json_values}),
    st.fixed_dictionaries({"data": st.fixed_dictionaries({"hits": st.lists(hit, max_size=4)})}),
)
bodies = st.one_of(
    documents.map(lambda doc: json.dumps(doc).encode()),
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b"<html><body>502 Bad Gateway</body></html>",
            b'{"data": {"hits": [{"meta": {"id": "a"}, "score": 1}',  # cut off
            b'{"data": {"hits": [{"meta": {"id": "a"}, "score": NaN}]}}',
            b"[" * 5000 + b"]" * 5000,  # deeper than json's recursion limit
            b"\xff\xfe{}",
        ]
    ),
    st.tuples(st.integers(0, 250), st.text(max_size=20)).map(
        lambda t: f"{'p' * t[0]}{ECHO}{t[1]}".encode()
    ),
)
headers = st.dictionaries(
    st.sampled_from(["content-type", "content-encoding", "content-length", "retry-after"]),
    st.sampled_from(["gzip", "deflate", "br", "identity", "x", "0", "7", "-1", "application/json"])
    | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
)
statuses = st.sampled_from([200, 204, 301, 400, 401, 404, 418, 429, 500, 502, 503]) | st.integers(
    200, 599
)
failures: st.SearchStrategy[Exception] = st.sampled_from(
    [
        httpx.ConnectError(f"cannot connect to proxy user:{SECRET}@proxy"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
        httpx.DecodingError("bad gzip"),
        ValueError(f"an unforeseen bug quoting Bearer {SECRET}"),
    ]
)


def search(handler: Callable[[httpx.Request], httpx.Response], k: int, **fields: Any) -> Answer:
    """One query through an HttpTarget over ``handler``, with the credential in a header."""
    config = TargetConfig(
        url=URL,
        headers={"Authorization": f"Bearer {SECRET}"},
        body={"q": "{query}", "k": "{k}"},
        results="data.hits",
        id="meta.id",
        retries=0,
        **fields,
    )

    async def go() -> Answer:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await HttpTarget("docs", config, client).search("q", k)

    return asyncio.run(go())


def assert_well_formed(answer: Answer, k: int) -> None:
    """The invariants every consumer of an Answer relies on; no piece of the secret leaks."""
    assert isinstance(answer, Answer)
    assert answer.outcome in OUTCOMES
    assert answer.latency_s >= 0
    if answer.answered:
        assert answer.outcome == ("ok" if answer.ids else "empty")
        assert answer.error is None
        assert len(answer.ids) == len(answer.scores) <= k
        assert all(isinstance(i, str) and i for i in answer.ids)
        assert all(s is None or (isinstance(s, float) and math.isfinite(s)) for s in answer.scores)
    else:
        assert (answer.ids, answer.scores) == ((), ())
        assert isinstance(answer.error, str)
        assert answer.error
        assert_no_piece_of_secret(answer.error)


def assert_no_piece_of_secret(text: str) -> None:
    """Not the secret, nor any 8 characters of it (a message cut short mid-secret leaks those)."""
    pieces = {SECRET[i : i + 8] for i in range(len(SECRET) - 7)}
    assert not [p for p in pieces if p in text], text


def expected_outcome(status: int) -> str | None:
    """The outcome an error status must give whatever the body; None for statuses that answer."""
    if status == 429:
        return "rate_limited"
    if 500 <= status < 600:
        return "http_5xx"
    if 400 <= status < 500:
        return "http_4xx"
    return None


def encode(body: bytes, encoding: str | None) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        return zlib.compress(body)
    return body


@FUZZ
@given(
    status=statuses,
    head=headers,
    body=bodies,
    k=st.integers(1, 5),
    scored=st.booleans(),
    streamed=st.booleans(),
)
def test_any_response_becomes_a_well_formed_answer(
    status: int, head: dict[str, str], body: bytes, k: int, scored: bool, streamed: bool
) -> None:
    """Whatever the status, headers (even a lying Content-Encoding or -Length) and body."""

    def handler(request: httpx.Request) -> httpx.Response:
        content = body.replace(ECHO.encode(), request.headers["Authorization"].encode())
        if streamed:  # a body as it comes off the network: httpx decodes nothing by itself
            return httpx.Response(status, headers=head, stream=httpx.ByteStream(content))
        return httpx.Response(status, headers=head, content=content)

    answer = search(handler, k, score="score" if scored else None)
    assert_well_formed(answer, k)
    # A body httpx holds already decoded fails on access when its encoding lies; only a
    # streamed body shows that the status alone decides the outcome.
    if streamed and expected_outcome(status) is not None:
        assert answer.outcome == expected_outcome(status), answer


@FUZZ
@given(
    pairs=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=6) | st.integers(-(2**40), 2**40),
            st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**40), 2**40),
        ),
        max_size=6,
    ),
    k=st.integers(1, 5),
    encoding=st.sampled_from([None, "gzip", "deflate"]),
)
def test_well_typed_hits_are_answered_in_the_targets_order(
    pairs: list[tuple[str | int, float | int]], k: int, encoding: str | None
) -> None:
    """Any valid hit list, compressed or not, is read as the top k ids and scores, in order."""
    payload = {"data": {"hits": [{"meta": {"id": i}, "score": s} for i, s in pairs]}}
    raw = encode(json.dumps(payload).encode(), encoding)
    head = {"content-encoding": encoding} if encoding else {}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=head, stream=httpx.ByteStream(raw))

    answer = search(handler, k)
    assert_well_formed(answer, k)
    assert answer.ids == tuple(str(i) for i, _ in pairs[:k])
    assert answer.scores == tuple(float(s) for _, s in pairs[:k])


@FUZZ
@given(failure=failures, retries=st.integers(0, 2))
def test_transport_failures_and_bugs_become_outcomes(failure: Exception, retries: int) -> None:
    """Errors raised while sending, even unforeseen ones, end as a failed Answer, secret hidden."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise failure

    async def no_wait(seconds: float) -> None:
        pass

    config = TargetConfig(
        url=URL,
        headers={"Authorization": f"Bearer {SECRET}"},
        body={"q": "{query}"},
        retries=retries,
    )

    async def go() -> Answer:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await HttpTarget("docs", config, client, sleep=no_wait).search("q", 3)

    answer = asyncio.run(go())
    assert_well_formed(answer, 3)
    assert not answer.answered
