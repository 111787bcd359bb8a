"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
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
