"""run_in: a call in a thread (a pool of one's own or the loop's), with the caller's context."""

from __future__ import annotations

import ast
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import structlog

from ragcanary.threads import run_in

pytestmark = pytest.mark.anyio
SRC = Path(__file__).resolve().parent.parent / "src" / "ragcanary"
WHO = contextvars.ContextVar("who", default="nobody")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _where(first: str, second: str = "", *, third: str = "") -> tuple[str, str, str]:
    return threading.current_thread().name, WHO.get(), f"{first}{second}{third}"


async def test_a_pool_of_one_s_own_runs_the_call_with_args_kwargs_and_context() -> None:
    WHO.set("caller")
    with ThreadPoolExecutor(1, thread_name_prefix="own-pool") as pool:
        name, who, joined = await run_in(pool, _where, "a", "b", third="c")
    assert name.startswith("own-pool")
    assert (who, joined) == ("caller", "abc")


async def test_none_is_the_loop_s_shared_pool_off_the_loop_s_thread() -> None:
    WHO.set("caller")
    name, who, joined = await run_in(None, _where, "x")
    assert name != threading.current_thread().name
    assert (who, joined) == ("caller", "x")


async def test_log_fields_bound_by_the_caller_reach_the_thread() -> None:
    structlog.contextvars.bind_contextvars(run_id="r-1")
    try:
        seen = await run_in(None, structlog.contextvars.get_contextvars)
    finally:
        structlog.contextvars.unbind_contextvars("run_id")
    assert seen["run_id"] == "r-1"


async def test_the_call_s_exception_reaches_the_caller() -> None:
    def boom() -> None:
        raise LookupError("from the thread")

    with pytest.raises(LookupError, match="from the thread"):
        await run_in(None, boom)


async def test_a_change_in_the_thread_leaves_the_caller_s_context_alone() -> None:
    WHO.set("caller")
    await run_in(None, WHO.set, "thread")
    assert WHO.get() == "caller"


# --- one helper ---------------------------------------------------------------------------------

_HANDING_OFF = {"to_thread", "run_in_executor"}


def handoffs(source: str) -> list[int]:
    """Lines of ``source`` that hand a call to a thread other than through ``run_in``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in _HANDING_OFF
    ]


def test_src_hands_work_to_threads_only_through_run_in() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "threads.py"
        for line in handoffs(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "await asyncio.to_thread(store.close)",
        "await asyncio.get_running_loop().run_in_executor(pool, call)",
        "await loop.run_in_executor(None, functools.partial(fn, 1))",
    ],
)
def test_the_check_finds_each_other_way_of_handing_off(line: str) -> None:
    """The check above bites: the calls run_in replaced are ones it finds."""
    assert handoffs(f"async def f():\n    {line}\n") == [2]
