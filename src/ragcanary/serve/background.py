"""The daemon's background writers: buffered runs once storage takes them, failure reports."""

from __future__ import annotations

import asyncio

import structlog

from ragcanary.serve.intake.queue import Intake, Recount
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.store.keeper import RunKeeper

log = structlog.get_logger("ragcanary")

# Buffered runs are retried after this, doubling while storage refuses them, up to the max.
STORAGE_RETRY_S = 1.0
STORAGE_RETRY_MAX_S = 10.0
INTAKE_FLUSH_S = 0.2  # failure reports are written in batches this often
PENDING_AFTER_CHANGE_S = 1.0  # while batches are stored, the pending gauge is read this often
PENDING_REFRESH_S = 15.0  # and at least this often (a review closes candidates elsewhere)


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


async def flush_intake(intake: Intake) -> None:
    """At shutdown: write what waits, or say how many reports are lost."""
    if intake.queued and await intake.flush() is None and intake.queued:
        log.warning("failure reports not stored at shutdown", reports=intake.queued)
