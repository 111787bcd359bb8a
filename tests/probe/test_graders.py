"""Judges over HTTP: the /rerank shape mapped to grades, a chat model parsed strictly,
retries on what may pass, and a document's text fetched by a generic target's `fetch:`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragcanary.config.judges import JudgeConfig
from ragcanary.config.target import TargetConfig
from ragcanary.probe.graders import make_grader
from ragcanary.probe.graders.chat import PROMPT_VERSION, ChatGrader, parse_grade
from ragcanary.probe.graders.exchange import JudgeExchange
from ragcanary.probe.graders.grades import Document, Graded
from ragcanary.probe.graders.rerank import RerankGrader, grade_of_score
from ragcanary.probe.presets import make_target
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

pytestmark = pytest.mark.anyio
Handler = Callable[[httpx.Request], httpx.Response]
DOCS = [Document("d1", "alpha text"), Document("d2", "beta text"), Document("d3", "gamma")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def judge(kind: str = "rerank", **fields: Any) -> JudgeConfig:
    url = (
        "https://judge.test/rerank"
        if kind == "rerank"
        else "https://judge.test/v1/chat/completions"
    )
    given = {"kind": kind, "url": url, "model": "m", "headers": {"Authorization": "Bearer k-123"}}
    return JudgeConfig(**(given | fields))


async def grade(
    config: JudgeConfig, handler: Handler, docs: list[Document] = DOCS
) -> tuple[list[Graded], list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(recording)) as client:
        exchange = JudgeExchange(config, client, sleep=_no_sleep)
        kind = RerankGrader if config.kind == "rerank" else ChatGrader
        grader = kind("j", config, client, exchange=exchange)
        return await grader.grade("what is alpha", docs), seen


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.mark.parametrize(
    ("score", "minimum", "grade"),
    [
        (0.49, 0.5, 0),
        (0.5, 0.5, 1),
        (0.66, 0.5, 1),
        (0.67, 0.5, 2),
        (0.84, 0.5, 3),
        (1.0, 0.5, 3),
        (7.5, 0.5, 3),
        (-3.0, 0.5, 0),
        (0.0, 0.0, 1),
        (0.34, 0.0, 2),
    ],
)
def test_a_relevance_score_maps_to_a_grade_by_thirds_above_min_grade_score(
    score: float, minimum: float, grade: int
) -> None:
    assert grade_of_score(score, minimum) == grade


async def test_rerank_sends_the_cohere_shape_once_and_maps_each_index() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        results = [
            {"index": 2, "relevance_score": 0.9},
            {"index": 0, "relevance_score": 0.1},
            {"index": 1, "relevance_score": 0.7},
        ]
        return httpx.Response(200, json={"results": results})

    got, seen = await grade(judge(), handler)
    assert [(g.id, g.grade, g.score) for g in got] == [
        ("d1", 0, 0.1),
        ("d2", 2, 0.7),
        ("d3", 3, 0.9),
    ]
    (request,) = seen
    assert json.loads(request.content) == {
        "model": "m",
        "query": "what is alpha",
        "documents": ["alpha text", "beta text", "gamma"],
        "top_n": 3,
    }
    assert request.headers["authorization"] == "Bearer k-123"


async def test_rerank_leaves_a_document_without_a_score_ungraded() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"results": [{"index": 1, "relevance_score": 0.6}]})

    got, _ = await grade(judge(), handler)
    assert [g.grade for g in got] == [None, 1, None]
    assert got[0].refusal == "the judge returned no score for it"


@pytest.mark.parametrize(
    "answer",
    [
        {"data": []},
        {"results": [{"index": 5, "relevance_score": 0.5}]},
        {"results": [{"index": 0, "relevance_score": "high"}]},
        {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]},
        [1, 2],
    ],
)
async def test_rerank_refuses_an_answer_of_another_shape(answer: Any) -> None:
    with pytest.raises(QueryFailed) as failed:
        await grade(judge(), lambda request: httpx.Response(200, json=answer))
    assert failed.value.outcome == "bad_response"


async def test_a_5xx_is_retried_within_retries_then_counted_as_http_5xx() -> None:
    with pytest.raises(QueryFailed) as failed:
        await grade(judge(retries=2), lambda request: httpx.Response(503, text="busy"))
    assert failed.value.outcome == "http_5xx"
    assert failed.value.attempts == 3


async def test_a_5xx_then_an_answer_grades() -> None:
    answers = iter(
        [
            httpx.Response(502),
            httpx.Response(200, json={"results": [{"index": 0, "relevance_score": 0.95}]}),
        ]
    )
    got, seen = await grade(judge(retries=1), lambda request: next(answers), DOCS[:1])
    assert [g.grade for g in got] == [3]
    assert len(seen) == 2


async def test_a_401_is_not_retried() -> None:
    with pytest.raises(QueryFailed) as failed:
        await grade(judge(retries=3), lambda request: httpx.Response(401))
    assert failed.value.outcome == "http_4xx"
    assert failed.value.attempts == 1
    assert "credentials" in failed.value.reason


def _chat(content: Any) -> httpx.Response:
    return httpx.Response(
        200, json={"choices": [{"message": {"role": "assistant", "content": content}}]}
    )


@pytest.mark.parametrize(
    ("content", "grade"),
    [
        ("2", 2),
        (" 3\n", 3),
        ("0", 0),
        ("4", None),
        ("2.", None),
        ("Grade: 2", None),
        ("I cannot help with that.", None),
        ("1 or 2", None),
        ("", None),
        (None, None),
        (2, None),
    ],
)
def test_a_chat_answer_is_one_digit_0_to_3_or_nothing(content: Any, grade: int | None) -> None:
    assert parse_grade(content) == grade


async def test_chat_asks_once_per_document_with_the_fixed_prompt() -> None:
    contents = iter(["3", "Sorry, I can't grade this.", "0"])
    got, seen = await grade(judge("chat"), lambda request: _chat(next(contents)))
    assert [g.grade for g in got] == [3, None, 0]
    assert got[1].refusal is not None
    assert "no grade 0-3" in got[1].refusal
    bodies = [json.loads(r.content) for r in seen]
    assert [b["messages"][1]["content"].splitlines()[-1] for b in bodies] == [
        "alpha text",
        "beta text",
        "gamma",
    ]
    assert {b["messages"][0]["content"] for b in bodies} == {bodies[0]["messages"][0]["content"]}
    assert all(b["temperature"] == 0 and b["model"] == "m" for b in bodies)


async def test_chat_without_choices_is_a_bad_response() -> None:
    with pytest.raises(QueryFailed) as failed:
        await grade(judge("chat"), lambda request: httpx.Response(200, json={"error": "x"}))
    assert failed.value.outcome == "bad_response"


async def test_the_fingerprint_names_the_prompt_version_and_changes_with_the_model() -> None:
    async with httpx.AsyncClient() as client:
        chat = make_grader("j", judge("chat"), client)
        other = make_grader("j", judge("chat", model="n"), client)
        rerank = make_grader("j", judge(), client)
        stricter = make_grader("j", judge(min_grade_score=0.7), client)
        secret = make_grader("j", judge(headers={"Authorization": "Bearer other"}), client)
    assert chat.fingerprint.startswith(f"chat:{PROMPT_VERSION}:")
    assert len({chat.fingerprint, other.fingerprint, rerank.fingerprint, stricter.fingerprint}) == 4
    assert secret.fingerprint == rerank.fingerprint  # a new key grades nothing again


async def test_a_generic_target_fetches_text_by_id_and_leaves_404_out() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        doc = request.url.raw_path.decode().removeprefix("/docs/")
        if doc == "gone":
            return httpx.Response(404)
        return httpx.Response(200, json={"doc": {"body": f"text of {doc}"}})

    config = TargetConfig(
        url="https://search.test/q",
        body={"q": "{query}"},
        fetch={"url": "https://search.test/docs/{id}", "text": "doc.body"},
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        target = HttpTarget("kb", config, client)
        assert await target.texts(["a/b", "gone", "c"]) == {
            "a/b": "text of a%2Fb",
            "c": "text of c",
        }
        assert (
            await HttpTarget(
                "kb", TargetConfig(url="https://search.test/q", body={"q": "{query}"}), client
            ).texts(["a"])
            is None
        )


async def test_a_failed_fetch_is_cannot_tell() -> None:
    config = TargetConfig(
        url="https://search.test/q",
        body={"q": "{query}"},
        retries=0,
        fetch={"url": "https://search.test/docs/{id}"},
    )
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(500))
    ) as client:
        assert await HttpTarget("kb", config, client).texts(["a"]) is None


async def test_a_qdrant_target_fetches_text_from_its_fetch_url() -> None:
    """Qdrant has no way of its own to a document's text: its fetch: URL is asked, as the
    generic target's is."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == "docs.test", request.url
        return httpx.Response(200, json={"body": f"text of {request.url.path.rsplit('/')[-1]}"})

    config = TargetConfig(
        preset="qdrant",
        url="http://127.0.0.1:6333",
        collection="docs",
        embedding="m",
        fetch={"url": "https://docs.test/docs/{id}", "text": "body"},
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        target = make_target("kb", config, client, redact=None)
        assert await target.texts(["d1", "d2"]) == {"d1": "text of d1", "d2": "text of d2"}
