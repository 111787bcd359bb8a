"""Handing a blocking call to a thread: ``run_in``, the one way ragcanary does it."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def run_in(
    executor: Executor | None, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """``fn(*args, **kwargs)`` in ``executor``, with the caller's context (its log fields
    included); ``None`` is the event loop's shared pool, where ``asyncio.to_thread`` runs it.

    A pool of one's own (one thread for the store's writes, one for judging) keeps that work
    in order and off the shared pool; everything else takes the shared one.
    """
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(executor, call)
