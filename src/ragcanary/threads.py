"""Running a call in a thread of one's own, as ``asyncio.to_thread`` runs it in the shared pool."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in(executor: Executor, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in ``executor``, with the caller's context (its log fields included)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(executor, call)
