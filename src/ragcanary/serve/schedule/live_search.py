"""What a target answers for a few queries right now: the live results of the candidates page.

The queries go out on the daemon's own client of the target and within its concurrency and
rate limit (``TargetGate``), so a page view never adds load a run would not be allowed. Each
query is bounded by the target's ``timeout`` (embedding, waiting for a slot and retries
included); a failure of any kind becomes an ``Answer`` with its outcome, never an exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack

import httpx

from ragcanary.measure.results import Answer, Outcome
from ragcanary.probe.cycle import open_target
from ragcanary.probe.runner import TargetGate
from ragcanary.serve.service import OnAnswer
from ragcanary.suites.loaded import LoadedConfig


async def search_now(
    loaded: LoadedConfig,
    name: str,
    client: httpx.AsyncClient,
    gate: TargetGate,
    queries: Sequence[str],
    depth: int,
    on_answer: OnAnswer,
) -> None:
    """Ask target ``name`` for the top ``depth`` of each of ``queries`` at once; call
    ``on_answer(index, answer)`` as each finishes, so a caller that stops waiting keeps the
    answers already in."""
    timeout = loaded.config.targets[name].timeout
    started = time.monotonic()
    try:
        async with AsyncExitStack() as stack:
            target, embed = await open_target(stack, loaded, name, client)

            async def one(index: int, query: str) -> None:
                began = time.monotonic()
                try:
                    async with asyncio.timeout(timeout):
                        vector = None
                        if embed is not None:
                            (embedded,) = await embed([query])
                            if embedded.vector is None:
                                reason = embedded.error or "the query could not be embedded"
                                on_answer(index, _failed("embedding_error", reason, began))
                                return
                            vector = embedded.vector
                        async with gate.slots:
                            if gate.limiter is not None:
                                await gate.limiter.acquire()
                            answer = await target.search(query, depth, vector)
                except TimeoutError:
                    answer = _failed(
                        "timeout", f"no answer within the target's {timeout:g} s", began
                    )
                except Exception as exc:  # a page must show the failure, not fail
                    answer = _failed(
                        "bad_response", f"the search failed: {type(exc).__name__}", began
                    )
                on_answer(index, answer)

            async with asyncio.TaskGroup() as group:
                for index, query in enumerate(queries):
                    group.create_task(one(index, query))
    except Exception as exc:  # opening the target or its embedder failed: every query says so
        # Only the kind of error: its text may carry a DSN or a header of the target's config.
        reason = f"the target could not be opened: {type(exc).__name__}"
        for index in range(len(queries)):
            on_answer(index, _failed("connect_error", reason, started))


def _failed(outcome: Outcome, reason: str, began: float) -> Answer:
    return Answer((), (), time.monotonic() - began, outcome, reason)
