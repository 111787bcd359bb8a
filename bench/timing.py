"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def median_seconds(call: Callable[[], Any], repeat: int, warmup: bool = True) -> float:
    """Median wall time of ``call`` over ``repeat`` runs, after one untimed run if ``warmup``."""
    if warmup:
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def calls_per_second(call: Callable[[Any], Any], inputs: Sequence[Any], seconds: float) -> float:
    """How many times per second ``call`` runs, cycling through ``inputs`` for about ``seconds``.

    The best of three rounds is reported: the slower rounds measure other processes on the
    machine, not the code.
    """
    for item in inputs:  # warm caches and any lazy imports
        call(item)
    best = 0.0
    for _ in range(3):
        done = 0
        start = time.perf_counter()
        elapsed = 0.0
        while elapsed < seconds / 3:
            for item in inputs:
                call(item)
            done += len(inputs)
            elapsed = time.perf_counter() - start
        best = max(best, done / elapsed)
    return best
