"""How much each benchmark does, at full scale (the documented one) and quick."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """How much each benchmark does; the full scale is the one docs/performance.md reports."""

    name: str
    queries: int
    delay_s: float
    concurrencies: list[int]
    rate_limited: list[int]
    rate: float
    ceiling: list[int]  # concurrencies timed against a retriever that answers at once
    runner_repeat: int
    sizes: list[int]
    size_repeats: dict[int, int]
    core_seconds: float
    canaries: int
    days: int


FULL = Scale(
    name="full",
    queries=200,
    delay_s=0.05,
    concurrencies=[1, 4, 8, 16, 32],
    rate_limited=[8, 32],
    rate=100.0,
    ceiling=[1, 8, 32],
    runner_repeat=3,
    sizes=[100, 1000, 5000],
    size_repeats={100: 5, 1000: 3, 5000: 1},
    core_seconds=3.0,
    canaries=50,
    days=30,
)
QUICK = Scale(
    name="quick",
    queries=100,
    delay_s=0.05,
    concurrencies=[1, 8, 32],
    rate_limited=[8],
    rate=100.0,
    ceiling=[1, 32],
    runner_repeat=1,
    sizes=[100, 1000],
    size_repeats={},
    core_seconds=1.0,
    canaries=5,
    days=30,
)
