"""Looking relevant ids up in an index: batches, filters narrowed page by page, typed ids."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragcanary.config.target import TargetConfig
from ragcanary.probe.presets import make_target
from ragcanary.probe.presets.lookup import (
    BATCH,
    MAX_PAGES,
    held_by_filter,
    integers,
    missing_in_batches,
    uuids,
)
from ragcanary.probe.presets.pinecone import PineconeTarget
from ragcanary.probe.retries import QueryFailed

pytestmark = pytest.mark.anyio
UUID = "8d2f9a1e-2b4c-4f6e-9a0b-1c2d3e4f5a6b"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_ids_are_asked_in_batches_and_those_not_held_are_missing() -> None:
    asked: list[list[str]] = []

    async def held(batch: list[str]) -> set[str]:
        asked.append(batch)
        return {i for i in batch if not i.endswith("7")}

    ids = [f"d{i}" for i in range(2 * BATCH + 50)]
    got = await missing_in_batches(ids, held)
    assert [len(batch) for batch in asked] == [BATCH, BATCH, 50]
    assert got == {i for i in ids if i.endswith("7")}


async def test_a_filter_asks_again_only_for_ids_not_seen_until_a_page_holds_all() -> None:
    asked: list[list[str]] = []
    pages = [({"a"}, False), ({"b", "unasked"}, False), (set(), True)]

    async def page(batch: list[str]) -> tuple[set[str], bool]:
        asked.append(batch)
        return pages.pop(0)

    assert await held_by_filter(["a", "b", "c"], page) == {"a", "b"}
    assert asked == [["a", "b", "c"], ["b", "c"], ["c"]]


async def test_a_full_page_without_a_new_id_cannot_tell() -> None:
    async def page(batch: list[str]) -> tuple[set[str], bool]:
        return {"other"}, False  # a tokenized field matches chunks of other values

    with pytest.raises(QueryFailed, match="held no id asked for"):
        await held_by_filter(["a", "b"], page)


async def test_a_filter_gives_up_after_its_page_limit() -> None:
    ids = [f"d{i}" for i in range(MAX_PAGES + 5)]

    async def page(batch: list[str]) -> tuple[set[str], bool]:
        return {batch[0]}, False  # one new id a page

    with pytest.raises(QueryFailed, match=f"within {MAX_PAGES} pages"):
        await held_by_filter(ids, page)


@pytest.mark.parametrize(
    ("ids", "ints", "canonical"),
    [
        (["7", "-3", "07", "+7", "7.0", "x", "٣"], [7, -3], []),
        ([UUID, UUID.upper(), UUID.replace("-", ""), "{" + UUID + "}"], [], [UUID]),
    ],
)
def test_only_ids_a_typed_key_prints_the_same_are_typed(
    ids: list[str], ints: list[int], canonical: list[str]
) -> None:
    assert integers(ids) == ints
    assert uuids(ids) == canonical


async def test_the_generic_http_target_cannot_tell() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = TargetConfig(url="http://search.test/q")
    async with client:
        assert await make_target("s", config, client).missing(["a"]) is None
    assert sent == []


async def test_a_lookup_retries_what_may_pass_like_a_query() -> None:
    answers = [
        httpx.Response(503, headers={"Retry-After": "2"}),
        httpx.Response(200, json={"vectors": {"a": {"id": "a"}}}),
    ]
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: answers.pop(0)))
    config = TargetConfig(preset="pinecone", url="https://idx.pinecone.test", retries=1)
    async with client:
        target = PineconeTarget("pc", config, client, sleep=sleep)
        assert await target.missing(["a", "b"]) == {"b"}
    assert pauses == [2.0]


async def test_a_failed_lookup_cannot_tell_and_never_raises() -> None:
    def boom(request: httpx.Request) -> Any:
        raise RuntimeError("a bug in a transport")

    client = httpx.AsyncClient(transport=httpx.MockTransport(boom))
    config = TargetConfig(preset="pinecone", url="https://idx.pinecone.test", retries=0)
    async with client:
        assert await make_target("pc", config, client).missing(["a"]) is None
