"""The daemon's background work: buffered runs once storage takes them, failure reports, and
the size of the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from ragcanary.serve.intake.queue import Intake, Recount
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.store.footprint import stored_bytes
from ragcanary.store.keeper import RunKeeper

log = structlog.get_logger("ragcanary")

# Buffered runs are retried after this, doubling while storage refuses them, up to the max.
STORAGE_RETRY_S = 1.0
STORAGE_RETRY_MAX_S = 10.0
INTAKE_FLUSH_S = 0.2  # failure reports are written in batches this often
PENDING_AFTER_CHANGE_S = 1.0  # while batches are stored, the pending gauge is read this often
PENDING_REFRESH_S = 15.0  # and at least this often (a review closes candidates elsewhere)
STORAGE_SIZE_S = 60.0  # the store's size is measured this often, and after each prune
# The SLOs' budgets are read from the stored runs this often, or as often as the most
# frequent SLO suite runs (at least every second).
SLO_BUDGET_S = 60.0


async def keep_storing(keeper: RunKeeper, exporter: Exporter) -> None:
    """Write buffered runs as soon as storage takes writes again, backing off while it won't."""
    delay = STORAGE_RETRY_S
    while True:
        await asyncio.sleep(delay)
        stored = await keeper.retry()
        exporter.set_buffered_runs(keeper.pending)
        delay = STORAGE_RETRY_S if stored else min(delay * 2, STORAGE_RETRY_MAX_S)


async def keep_intake(intake: Intake, keeper: RunKeeper, exporter: Exporter) -> None:
    """Write the queued failure reports in batches; refresh the pending gauge now and then."""
    loop = asyncio.get_running_loop()
    recount = Recount(PENDING_AFTER_CHANGE_S, PENDING_REFRESH_S)
    while True:
        await asyncio.sleep(INTAKE_FLUSH_S)
        if await intake.flush() is not None:
            recount.stored()
        started = loop.time()
        if recount.due(started):
            pending = await keeper.call(intake.store.pending_by_signal)
            if pending is not None:
                exporter.set_candidates_pending(pending)
            recount.counted(started, ok=pending is not None)


async def keep_measuring(
    keeper: RunKeeper, exporter: Exporter, every_s: float = STORAGE_SIZE_S
) -> None:
    """Export the store's size now and every ``every_s`` (``measure_storage``)."""
    while True:
        await measure_storage(keeper, exporter)
        await asyncio.sleep(every_s)


async def measure_storage(keeper: RunKeeper, exporter: Exporter) -> None:
    """Set ``ragcanary_storage_bytes`` to the store's size, measured in a worker thread.

    While storage is down (or the measurement fails, which counts a storage error) the gauge
    keeps the last size measured: an outage does not empty the store.
    """
    size = await keeper.call(stored_bytes, keeper.store)
    if size is not None:
        exporter.set_storage_bytes(size)


async def keep_budgets(
    keeper: RunKeeper,
    exporter: Exporter,
    budgets: Callable[[str | None, str | None], list[dict[str, Any]]],
    every_s: Callable[[], float],
) -> None:
    """Export each SLO's budget left and burn rates, read from storage in a worker thread now
    and every ``every_s()`` seconds (each read takes only the runs stored since the last);
    during an outage the gauges keep what was read last."""
    while True:
        rows = await keeper.call(budgets, None, None)
        for row in rows or ():
            exporter.set_budget(
                row["suite"], row["target"], row["budget_remaining"], row["burn_rate"]
            )
        await asyncio.sleep(every_s())


async def flush_intake(intake: Intake) -> None:
    """At shutdown: write what waits, or say how many reports are lost."""
    if intake.queued and await intake.flush() is None and intake.queued:
        log.warning("failure reports not stored at shutdown", reports=intake.queued)
