"""Waits shorter than a millisecond: a Linux timerfd watched by the running event loop.

asyncio wakes for its timers from ``epoll_wait``, whose timeout is whole milliseconds, rounded
up: a wait of 0.4 ms ends after 1 ms unless a socket wakes the loop first. A run paces its
starts a fraction of a millisecond apart (``probe.runner.Pacer``), and at C = 32 against a
retriever answering in 20 ms two thirds of its starts wait, on average 0.5 ms too long, which
made a 1,000-canary cycle 2-4% longer (docs/performance.md, "Cycle time"). A timerfd in the
loop's own epoll set fires to the microsecond, and costs one descriptor per ``PreciseTimer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import heapq
import itertools
import math
import os
import sys
import time
from types import TracebackType
from typing import Any

_CLOCK_MONOTONIC = 1  # the clock time.monotonic() reads on Linux
_NANOSECONDS = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


@functools.cache
def _libc() -> Any | None:
    """The C library's timerfd calls, or None where there are none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = (ctypes.c_int, ctypes.c_int)
    create.restype = ctypes.c_int
    settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p)
    settime.restype = ctypes.c_int
    return libc


class PreciseTimer:
    """``sleep`` to the microsecond on Linux, through one timerfd the running loop watches.

    Enter it inside a running event loop and leave it before the loop closes; leaving closes
    the descriptor and ends any sleep still waiting. Where there is no timerfd (not Linux, a
    loop that cannot watch descriptors, or a kernel that refuses one), ``precise`` is False and
    ``sleep`` is ``asyncio.sleep``.
    """

    def __init__(self) -> None:
        self.precise = False
        self._fd = -1
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._armed_for = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None
        self._settime: Any = None

    def __enter__(self) -> PreciseTimer:
        loop = asyncio.get_running_loop()
        libc = _libc()
        if libc is None:
            return self
        fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:  # out of files, say: asyncio's timers will do
            return self
        try:
            loop.add_reader(fd, self._expired)
        except NotImplementedError:  # a loop that cannot watch descriptors (Windows' proactor)
            os.close(fd)
            return self
        self._fd, self._loop, self._settime, self.precise = fd, loop, libc.timerfd_settime, True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.precise:
            return
        assert self._loop is not None
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self.precise, self._fd = False, -1
        for _, _, waiter in self._waiting:
            waiter.cancel()
        self._waiting.clear()

    async def sleep(self, delay: float) -> None:
        """Return after ``delay`` seconds, and no more than the loop's own latency later."""
        if not self.precise or delay <= 0:
            await asyncio.sleep(delay)
            return
        assert self._loop is not None
        due = time.monotonic() + delay
        waiter = self._loop.create_future()
        heapq.heappush(self._waiting, (due, next(self._order), waiter))
        if due < self._armed_for:
            self._arm(due)
        await waiter

    def _expired(self) -> None:
        with contextlib.suppress(BlockingIOError):  # woken with nothing to read
            os.read(self._fd, 8)  # how many times it expired; only that it did matters
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():  # a cancelled sleep leaves its entry behind
                waiter.set_result(None)
        self._armed_for = math.inf
        if self._waiting:
            self._arm(self._waiting[0][0])

    def _arm(self, due: float) -> None:
        """Set the timer to expire ``due`` (time.monotonic()), relative to now."""
        left = max(1, math.ceil((due - time.monotonic()) * _NANOSECONDS))  # 0 would disarm it
        spec = _Itimerspec()
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(left, _NANOSECONDS)
        if self._settime(self._fd, 0, ctypes.byref(spec), None) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"timerfd_settime: {os.strerror(error)}")
        self._armed_for = due
