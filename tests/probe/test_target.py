"""Tests for the generic HTTP target: templates, response mapping, failures, retries and secrets."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import jmespath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from retrievers import FakeRetriever

from ragcanary.config.target import TargetConfig
from ragcanary.errors import ConfigError
from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import PathMiss
from ragcanary.probe.retries import retry_after_seconds
from ragcanary.probe.runner import run_suite
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.probe.templates import compile_path, fill_template
from ragcanary.redact import Redactor

pytestmark = pytest.mark.anyio

URL = "http://retriever.test/search"
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class Sleeps:
    """An injected sleep that records every delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def mock_target(handler, sleep=None, clock=time.perf_counter, redact=None, **fields):
    """An HttpTarget over httpx.MockTransport with the README's example API shape."""
    config = TargetConfig(
        **{"url": URL, "body": {"q": "{query}", "limit": "{k}"}, "retries": 0, **fields}
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    target = HttpTarget(
        "docs",
        config,
        client,
        redact=redact,
        sleep=sleep or Sleeps(),
        clock=clock,
        jitter=lambda: 0.5,
        wall_clock=lambda: NOW,
    )
    return target, client


def hits(*pairs):
    return {"hits": [{"id": doc_id, "score": score} for doc_id, score in pairs]}


def answers(*responses):
    """A handler that answers each request with the next response, recording the requests."""
    queue = list(responses)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item

    return handler, seen


@pytest.fixture
def anyio_backend():
    return "asyncio"


# --- request templates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ({"q": "{query}", "limit": "{k}"}, {"q": "reset password", "limit": 10}),
        ("top {k} for {query}", "top 10 for reset password"),
        ("{k}", 10),
        (" {k}", " 10"),
        ("{not_a_placeholder} {query}", "{not_a_placeholder} reset password"),
        ("{{query}}", "{reset password}"),
        ({"a": [{"b": "{k}"}, "{query}"]}, {"a": [{"b": 10}, "reset password"]}),
        (
            {"{query}": 1, "n": None, "x": True, "f": 0.5},
            {"{query}": 1, "n": None, "x": True, "f": 0.5},
        ),
        (None, None),
    ],
)
def test_fill_template_replaces_only_query_and_k(template, expected):
    """Only {query} and {k} are filled, in values only; exactly "{k}" becomes an int."""
    assert fill_template(template, "reset password", 10) == expected


@settings(max_examples=100, deadline=None)
@given(query=st.text(max_size=40), k=st.integers(min_value=1, max_value=1000))
def test_query_is_sent_literally_even_with_braces(query, k):
    """A query containing {k} or {query} is inserted as-is, never filled a second time."""
    assert fill_template({"q": "{query}"}, query, k) == {"q": query}
    assert fill_template("<{query}|{k}>", query, k) == f"<{query}|{k}>"


async def test_post_sends_body_template_with_k_as_integer_and_configured_headers():
    """The JSON body carries the query and k as an int; headers go out as configured."""
    handler, seen = answers(httpx.Response(200, json=hits(("a", 1.0))))
    target, client = mock_target(handler, headers={"X-Tenant": "acme"}, params={"v": "{k}"})
    async with client:
        await target.search('say "{k}" please', 7)
    request = seen[0]
    assert request.method == "POST"
    assert json.loads(request.content) == {"q": 'say "{k}" please', "limit": 7}
    assert request.headers["X-Tenant"] == "acme"
    assert request.url.params["v"] == "7"


async def test_get_sends_params_in_query_string_and_no_body():
    """GET fills `params` into the query string and sends no body."""
    handler, seen = answers(httpx.Response(200, json=hits(("a", 1.0))))
    target, client = mock_target(handler, method="GET", params={"q": "{query}", "n": "{k}"})
    async with client:
        answer = await target.search("vector db", 5)
    assert answer.outcome == "ok"
    assert seen[0].method == "GET"
    assert dict(seen[0].url.params) == {"q": "vector db", "n": "5"}
    assert seen[0].content == b""


# --- response mapping ---------------------------------------------------------------------------


async def test_hits_keep_target_order_and_int_ids_become_strings():
    """Ids and scores come back in the target's order (never re-sorted); int ids become str."""
    body = hits(("b", 0.2), (7, 0.9), ("a", 1))
    target, client = mock_target(answers(httpx.Response(200, json=body))[0])
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, answer.ids, answer.scores) == ("ok", ("b", "7", "a"), (0.2, 0.9, 1.0))
    assert answer.error is None


async def test_only_top_k_hits_are_kept_and_checked():
    """A target that ignores the limit is cut to k; a malformed hit below the cut is ignored."""
    body = {"hits": [{"id": "a", "score": 1}, {"id": "b", "score": 0.5}, {"oops": True}]}
    target, client = mock_target(answers(httpx.Response(200, json=body))[0])
    async with client:
        answer = await target.search("q", 2)
    assert (answer.outcome, answer.ids) == ("ok", ("a", "b"))


async def test_empty_hit_list_is_an_empty_answer_not_a_failure():
    """An empty list is an answer: outcome empty, counted as answered."""
    target, client = mock_target(answers(httpx.Response(200, json={"hits": []}))[0])
    async with client:
        answer = await target.search("q", 5)
    assert (answer.outcome, answer.ids, answer.answered) == ("empty", (), True)


async def test_without_score_path_scores_are_none():
    """`score: null` means the target gives no scores: each is recorded as None."""
    body = {"hits": [{"id": "a"}, {"id": "b"}]}
    target, client = mock_target(answers(httpx.Response(200, json=body))[0], score=None)
    async with client:
        answer = await target.search("q", 5)
    assert answer.scores == (None, None)


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (httpx.Response(200, html="<!DOCTYPE html><html>Login</html>"), "looks like HTML"),
        (httpx.Response(200, content=b""), "body is empty"),
        (httpx.Response(200, content=b"{'hits': "), "not JSON"),
        (httpx.Response(200, json={"results": []}), "no list of hits at 'hits'"),
        (httpx.Response(200, json={"hits": {"a": 1}}), "'hits' is {\"a\": 1}, not a list"),
        (
            httpx.Response(200, json={"hits": [{"id": "a", "score": 1}, {"score": 2}]}),
            "hits[1]: no id at 'id'",
        ),
        (httpx.Response(200, json={"hits": [{"id": True, "score": 1}]}), "not a string or integer"),
        (
            httpx.Response(200, json={"hits": [{"id": "a", "score": "high"}]}),
            "hits[0]: score at 'score' is \"high\", not a number",
        ),
        (httpx.Response(200, json={"hits": [{"id": "a", "score": False}]}), "not a number"),
        (
            httpx.Response(200, content=b'{"hits": [{"id": "a", "score": NaN}]}'),
            "not a finite number",
        ),
        (httpx.Response(200, json={"hits": [{"id": "a"}]}), "no score at 'score' (set score: null"),
        (httpx.Response(304), "unexpected HTTP 304"),
    ],
)
async def test_malformed_answers_are_bad_response_with_a_clear_reason_and_not_retried(
    response, reason
):
    """Anything but a usable hit list is bad_response, says why, and is not retried."""
    handler, seen = answers(response)
    target, client = mock_target(handler, retries=2)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "bad_response"
    assert reason in answer.error
    assert (answer.ids, len(seen)) == ((), 1)


@pytest.mark.parametrize(
    ("body", "miss", "reason"),
    [
        pytest.param(
            {"results": [], "took": 3},
            PathMiss("results", "hits", ("results", "took")),
            "no list of hits at 'hits' (the answer holds the keys results, took)",
            id="results-missing",
        ),
        pytest.param(
            {"hits": {"a": 1}},
            PathMiss("results", "hits", ("hits",)),
            "'hits' is {\"a\": 1}, not a list of hits",
            id="results-not-a-list",
        ),
        pytest.param(
            [{"id": "a"}],
            PathMiss("results", "hits", ()),
            "no list of hits at 'hits' (the answer holds no keys (no JSON object))",
            id="answer-not-an-object",
        ),
        pytest.param(
            {"hits": [{"doc": "a", "score": 1}, {"doc": "b", "rank": 2}]},
            PathMiss("id", "id", ("doc", "score", "rank")),
            "hits[0]: no id at 'id' (the hits hold the keys doc, score, rank)",
            id="id-in-no-hit",
        ),
        pytest.param(
            {"hits": [{"id": "a", "relevance": 1}]},
            PathMiss("score", "score", ("id", "relevance")),
            "hits[0]: no score at 'score' (set score: null if the target returns none) "
            "(the hits hold the keys id, relevance)",
            id="score-in-no-hit",
        ),
        pytest.param(
            {"hits": [{"id": "a", "score": 1}, {"score": 2}]},
            None,
            "hits[1]: no id at 'id'",
            id="id-in-some-hits-is-the-target-s-data",
        ),
    ],
)
async def test_a_path_that_finds_nothing_in_an_answer_says_what_the_answer_holds(
    body, miss, reason
):
    """Issue 34 item 7: the answer's keys show which path to write; the miss marks a config
    that does not fit the answer (the run decides whether all of them missed)."""
    target, client = mock_target(answers(httpx.Response(200, json=body))[0])
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, answer.error, answer.miss) == ("bad_response", reason, miss)


async def test_the_first_malformed_hit_is_named_its_id_before_its_score():
    """The reason names the first problem in hit order, as a reader going down the list would."""
    body = {"hits": [{"id": "a", "score": "high"}, {"score": 1}, {"id": "c", "score": None}]}
    target, client = mock_target(answers(httpx.Response(200, json=body))[0])
    async with client:
        answer = await target.search("q", 10)
    assert answer.error == "hits[0]: score at 'score' is \"high\", not a number"
    body = {"hits": [{"id": "a", "score": 1}, {"id": 1.5, "score": "high"}]}
    target, client = mock_target(answers(httpx.Response(200, json=body))[0])
    async with client:
        answer = await target.search("q", 10)
    assert answer.error == "hits[1]: id at 'id' is 1.5, not a string or integer"


async def test_nested_paths_name_the_hit_and_path_in_the_reason():
    """A hit without an id at a nested path names the hit index and the path."""
    body = {"data": {"matches": [{"meta": {"doc_id": "x"}}] * 3 + [{"meta": {}}]}}
    target, client = mock_target(
        answers(httpx.Response(200, json=body))[0],
        results="data.matches",
        id="meta.doc_id",
        score=None,
    )
    async with client:
        answer = await target.search("q", 10)
    assert answer.error == "data.matches[3]: no id at 'meta.doc_id'"


async def test_body_over_the_size_cap_is_refused_by_content_length():
    """A declared body over max_response_bytes is refused before reading it."""
    big = httpx.Response(200, content=b"x" * 5000)
    target, client = mock_target(answers(big)[0], max_response_bytes=1000)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "bad_response"
    assert answer.error.startswith("response larger than 1000 bytes")


async def test_endless_body_without_length_stops_reading_at_the_cap():
    """A streamed body with no length stops being read as soon as it passes the cap."""
    produced = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal produced
        while produced < 1000:  # bounded so a broken cap fails the test instead of eating memory
            produced += 1
            yield b"[" * 1024

    target, client = mock_target(
        lambda request: httpx.Response(200, content=endless()), max_response_bytes=10_000
    )
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, answer.error) == ("bad_response", "response larger than 10000 bytes")
    assert produced <= 11


async def test_slow_drip_body_times_out_within_the_deadline():
    """A body that keeps dripping bytes cannot hang a query past `timeout`."""

    async def drip() -> AsyncIterator[bytes]:
        yield b'{"hits": ['
        while True:
            await asyncio.sleep(0.01)  # the misbehaving server, not test synchronisation
            yield b" "

    target, client = mock_target(lambda request: httpx.Response(200, content=drip()), timeout=0.3)
    started = time.perf_counter()
    async with client, asyncio.timeout(5):  # a broken deadline fails here instead of hanging
        answer = await target.search("q", 10)
    elapsed = time.perf_counter() - started
    assert answer.outcome == "timeout"
    assert "within 0.3s" in answer.error
    assert elapsed < 1.5


async def test_the_deadline_alone_times_a_request():
    """A request reaches the transport with no timeout of its own for a connect, a read or the
    pool: the query's deadline covers all of them, so the transport sets no timer of its own
    on every request and every chunk read, which would only ever fire after the deadline."""
    handler, seen = answers(httpx.Response(200, json=hits(("a", 1.0))))
    target, client = mock_target(handler, timeout=2.5)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "ok"
    assert seen[0].extensions["timeout"] == dict.fromkeys(("connect", "read", "write", "pool"))


# --- failures and retries -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (httpx.ReadTimeout("read timed out"), "timeout"),
        (httpx.ConnectTimeout("connect timed out"), "timeout"),
        (httpx.PoolTimeout("pool"), "timeout"),
        (httpx.ConnectError("[Errno 111] Connection refused"), "connect_error"),
        (httpx.ReadError("Connection reset by peer"), "connect_error"),
        (httpx.RemoteProtocolError("Server disconnected"), "connect_error"),
        (httpx.DecodingError("bad gzip"), "bad_response"),
        (ValueError("a bug below httpx"), "connect_error"),
    ],
)
async def test_transport_failures_become_outcomes_not_exceptions(error, outcome):
    """Timeouts, refused or reset connections and unexpected errors map to bounded outcomes."""
    handler, _ = answers(error)
    target, client = mock_target(handler)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == outcome
    assert answer.ids == ()
    assert answer.error


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (400, "http_4xx"),
        (401, "http_4xx"),
        (404, "http_4xx"),
        (429, "rate_limited"),
        (500, "http_5xx"),
        (503, "http_5xx"),
    ],
)
async def test_http_errors_map_to_their_outcome(status, outcome):
    """Each HTTP error class has its own outcome; the reason carries the status and body start."""
    handler, _ = answers(httpx.Response(status, json={"detail": "top_k must be <= 50"}))
    target, client = mock_target(handler)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == outcome
    assert answer.error.startswith(f"HTTP {status}")
    assert "top_k must be <= 50" in answer.error


async def test_4xx_is_not_retried():
    """A client error will not fix itself: exactly one request, no sleep."""
    handler, seen = answers(httpx.Response(400, text="bad field"))
    sleeps = Sleeps()
    target, client = mock_target(handler, sleep=sleeps, retries=3)
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, len(seen), sleeps.delays) == ("http_4xx", 1, [])


async def test_5xx_is_retried_with_backoff_then_succeeds():
    """A transient 5xx is retried after the backoff delay and the final answer is ok."""
    handler, seen = answers(httpx.Response(502), httpx.Response(200, json=hits(("a", 1.0))))
    sleeps = Sleeps()
    target, client = mock_target(handler, sleep=sleeps, retries=2)
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, answer.ids, len(seen)) == ("ok", ("a",), 2)
    assert sleeps.delays == [pytest.approx(0.2)]


async def test_backoff_doubles_and_the_reason_counts_attempts():
    """Every retry waits twice as long as the one before; the last failure is reported."""
    sleeps = Sleeps()
    target, client = mock_target(answers(httpx.ConnectError("refused"))[0], sleep=sleeps, retries=3)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "connect_error"
    assert sleeps.delays == [pytest.approx(0.2), pytest.approx(0.4), pytest.approx(0.8)]
    assert answer.error.endswith("(after 4 attempts)")


@pytest.mark.parametrize(
    ("status", "retry_after", "expected_sleep"),
    [
        (429, "7", 7.0),
        (503, "2", 2.0),
        (429, (NOW + timedelta(seconds=12)).strftime("%a, %d %b %Y %H:%M:%S GMT"), 12.0),
        (429, "Fri, 31 Dec 2100 23:59:59 GMT", 30.0),
        (429, "3600", 30.0),
        (429, "whenever", 0.2),
    ],
)
async def test_retry_after_is_honoured_and_capped(status, retry_after, expected_sleep):
    """Retry-After (seconds or HTTP date) sets the wait, capped at 30s; unreadable -> backoff."""
    handler, _ = answers(
        httpx.Response(status, headers={"Retry-After": retry_after}),
        httpx.Response(200, json=hits(("a", 1.0))),
    )
    sleeps = Sleeps()
    target, client = mock_target(handler, sleep=sleeps, retries=1)
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "ok"
    assert sleeps.delays == [pytest.approx(expected_sleep)]


async def test_rate_limited_after_last_retry_does_not_sleep_again():
    """When retries run out the 429 is reported at once, without a useless final wait."""
    sleeps = Sleeps()
    handler, seen = answers(httpx.Response(429, headers={"Retry-After": "1"}))
    target, client = mock_target(handler, sleep=sleeps, retries=1)
    async with client:
        answer = await target.search("q", 10)
    assert (answer.outcome, len(seen), sleeps.delays) == ("rate_limited", 2, [1.0])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("0", 0.0),
        ("Wed, 01 May 2024 12:00:10 GMT", 10.0),
        ("Wed, 01 May 2024 11:00:00 GMT", 0.0),
        ("-3", None),
        ("nan", None),
        ("soon", None),
        ("", None),
    ],
)
def test_retry_after_seconds_reads_delays_and_dates(value, expected):
    """Both Retry-After forms are read; a date in the past means now; junk means unknown."""
    assert retry_after_seconds(value, NOW) == expected


async def test_latency_is_the_time_of_the_final_attempt():
    """latency_s measures only the attempt that produced the answer, not earlier ones or waits."""
    ticks = iter([0.0, 1.0, 50.0, 50.25])
    handler, _ = answers(httpx.Response(500), httpx.Response(200, json=hits(("a", 1.0))))
    target, client = mock_target(handler, clock=lambda: next(ticks), retries=1)
    async with client:
        answer = await target.search("q", 10)
    assert answer.latency_s == pytest.approx(0.25)


# --- secrets ------------------------------------------------------------------------------------


async def test_header_values_never_appear_in_errors():
    """A target echoing the credential back in its error body does not leak it into `error`."""

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, text=f"invalid token {request.headers['Authorization']}")

    target, client = mock_target(echo, headers={"Authorization": "Bearer tok-s3cr3t-999"})
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "http_4xx"
    assert "tok-s3cr3t-999" not in answer.error
    assert "***" in answer.error


async def test_injected_redactor_scrubs_env_values_from_errors():
    """The caller's redactor (with ${VAR} values) is applied to every error text."""
    handler, _ = answers(httpx.ConnectError("cannot reach proxy user:hunter2-env@proxy"))
    target, client = mock_target(handler, redact=Redactor(["hunter2-env"]))
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "connect_error"
    assert "hunter2-env" not in answer.error
    assert "***" in answer.error


async def test_a_returned_id_holding_a_secret_s_characters_is_kept_as_returned():
    """Ids are the target's data: ``acme-doc-1`` stays ``acme-doc-1`` when ``acme`` is a secret.

    Rewriting it (``***-doc-1``) made a perfect retriever score Hit@k 0 and merged ids.
    """
    handler, _ = answers(httpx.Response(200, json=hits(("acme-doc-1", 0.9), ("doc-acme", 0.8))))
    target, client = mock_target(
        handler, redact=Redactor(["acme"]), headers={"X-Tenant": "acme", "X-Key": "Bearer k3y"}
    )
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "ok"
    assert answer.ids == ("acme-doc-1", "doc-acme")


@pytest.mark.parametrize("returned", ["acme", "Bearer k3y", "k3y-env-value", 4711])
async def test_an_id_that_is_a_secret_is_refused_without_showing_it(returned):
    """An id equal to a header value or a ${VAR} value is a bad response; the reason names the
    hit and the path, never the value."""
    handler, _ = answers(httpx.Response(200, json=hits(("doc-1", 0.9), (returned, 0.8))))
    target, client = mock_target(
        handler,
        redact=Redactor(["k3y-env-value", "4711"]),
        headers={"X-Tenant": "acme", "Authorization": "Bearer k3y"},
    )
    async with client:
        answer = await target.search("q", 10)
    assert answer.outcome == "bad_response"
    assert answer.ids == ()
    assert "hits[1]" in answer.error
    assert "secret" in answer.error
    assert str(returned) not in answer.error
    assert "k3y" not in answer.error


# --- construction -------------------------------------------------------------------------------


def test_bad_jmespath_is_a_config_error_naming_the_field():
    """Response paths are compiled up front; a broken one is a located config problem."""
    with pytest.raises(ConfigError) as caught:
        HttpTarget("docs", TargetConfig(url=URL, id="meta.[doc"), httpx.AsyncClient())
    assert [p.path for p in caught.value.problems] == ["targets.docs.id"]


async def test_make_client_leaves_redirects_to_the_target_and_identifies_itself():
    """HttpTarget follows redirects (it decides who gets the headers); a ragcanary User-Agent."""
    async with make_client(TargetConfig(url=URL, verify_tls=False)) as client:
        assert not client.follow_redirects
        assert client.headers["User-Agent"].startswith("ragcanary/")


# --- against a real retriever, through the production client ------------------------------------


async def test_round_trip_with_nested_ids_and_api_key_header():
    """A real HTTP round trip: body template, api-key header, nested ids and scores."""
    with FakeRetriever() as retriever:
        config = retriever.target_config()
        async with make_client(config) as client:
            target = HttpTarget("fake", config, client)
            answer = await target.search("reset password", 2)
    assert (answer.outcome, answer.ids, answer.scores) == ("ok", ("doc-7", "doc-2"), (0.93, 0.81))
    assert answer.latency_s > 0
    sent = retriever.requests[0]
    assert sent.body == {"text": "reset password", "top_k": 2}
    assert sent.headers["X-Api-Key"] == retriever.api_key


async def test_wrong_api_key_is_http_4xx_without_the_key_in_the_error():
    """A rejected credential is http_4xx; the reason does not repeat the key."""
    with FakeRetriever() as retriever:
        config = retriever.target_config(headers={"X-Api-Key": "wrong-key-456"})
        async with make_client(config) as client:
            answer = await HttpTarget("fake", config, client).search("reset password", 3)
    assert answer.outcome == "http_4xx"
    assert answer.error.startswith("HTTP 401")
    assert "wrong-key-456" not in answer.error


async def test_outage_503_is_http_5xx_after_retries():
    """A retriever answering 503 is retried `retries` times and reported as http_5xx."""
    sleeps = Sleeps()
    with FakeRetriever(status=503) as retriever:
        config = retriever.target_config(retries=2)
        async with make_client(config) as client:
            answer = await HttpTarget("fake", config, client, sleep=sleeps).search("x", 3)
    assert answer.outcome == "http_5xx"
    assert len(retriever.requests) == 3
    assert len(sleeps.delays) == 2


async def test_refused_connection_is_connect_error():
    """Nothing listening on the port: connect_error with the reason, after the retries."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = TargetConfig(url=f"http://127.0.0.1:{port}/search", retries=1)
    sleeps = Sleeps()
    async with make_client(config) as client:
        answer = await HttpTarget("down", config, client, sleep=sleeps).search("q", 3)
    assert answer.outcome == "connect_error"
    assert answer.error.startswith("connection failed: ConnectError")
    assert len(sleeps.delays) == 1


async def test_concurrent_cycle_takes_about_ceil_n_over_c_times_latency():
    """20 queries at concurrency 10 against a 0.2 s retriever take ~0.4 s, not 4 s."""
    n, c, latency = 20, 10, 0.2
    corpus = {f"query {i}": [(f"doc-{i}", 1.0)] for i in range(n)}
    suite = Suite(tuple(Case(id=f"c{i}", query=f"query {i}") for i in range(n)))
    with FakeRetriever(corpus=corpus, delay_s=latency) as retriever:
        config = retriever.target_config()
        async with make_client(config) as client:
            target = HttpTarget("fake", config, client)
            started = time.perf_counter()
            run = await run_suite("s", suite, target, depth=5, concurrency=c, rate_limit=None)
            elapsed = time.perf_counter() - started
    assert [r.answer.ids for r in run.results] == [(f"doc-{i}",) for i in range(n)]
    assert math.ceil(n / c) * latency * 0.9 <= elapsed < n * latency / 2
    assert run.duration_s == pytest.approx(elapsed, abs=0.1)


_NAMES = st.sampled_from(["hits", "id", "meta", "doc_id", "_x", "true", "null", "a1"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(_NAMES, min_size=1, max_size=3), document=_JSON)
def test_dotted_paths_find_what_jmespath_finds(names: list[str], document: object) -> None:
    """The fast path for plain dotted names gives jmespath's own answer on any JSON."""
    expression = ".".join(names)
    assert compile_path(expression)(document) == jmespath.search(expression, document)


@pytest.mark.parametrize(
    ("expression", "document", "expected"),
    [
        ("hits[0].id", {"hits": [{"id": "a"}]}, "a"),
        ('data."doc-id"', {"data": {"doc-id": "b"}}, "b"),
        ("results[*].doc", {"results": [{"doc": 1}, {"doc": 2}]}, [1, 2]),
    ],
)
def test_other_paths_are_full_jmespath(expression: str, document: object, expected: object) -> None:
    """Indexes, quoted names and projections still work: they go to jmespath itself."""
    assert compile_path(expression)(document) == expected
