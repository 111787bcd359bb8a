"""Where the daemon keeps runs: storage behind the outage buffer, and baselines to compare with."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import structlog

from ragcanary.store.buffer import BufferedWriter
from ragcanary.store.storage import StorageError, Store

log = structlog.get_logger("ragcanary")

Pair = tuple[str, str]  # (suite, target)


class RunKeeper:
    """Stores runs without ever blocking or failing a run, and finds each pair's baseline.

    Storage is called in a thread. When it is unreachable, finished runs wait in the
    buffer and baselines come from memory; nothing here raises a storage error.
    """

    def __init__(self, store: Store, capacity: int = 1000) -> None:
        self.store = store
        self.writer = BufferedWriter(
            store, capacity, on_drop=self._dropped, on_reject=self._rejected
        )
        self._pinned: dict[Pair, dict[str, Any]] = {}
        self._previous: dict[Pair, dict[str, Any]] = {}
        self._migrated = False

    async def ensure_schema(self) -> bool:
        """Create or upgrade the tables once storage is reachable; whether they exist now."""
        if not self._migrated:
            try:
                await asyncio.to_thread(self.store.migrate)
            except StorageError as exc:
                log.warning(
                    "storage unreachable; runs are buffered until it returns", error=str(exc)
                )
                return False
            self._migrated = True
        return True

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call storage in a thread; an outage is logged and answered with None."""
        try:
            await self.ensure_schema()
            return await asyncio.to_thread(fn, *args, **kwargs)
        except StorageError as exc:
            log.warning("storage unreachable", error=str(exc), call=fn.__name__)
            return None

    async def save(self, report: dict[str, Any]) -> bool:
        """Store ``report`` after any backlog, in order; False when it had to wait in memory."""
        if report["outcome"] != "unavailable":
            self._previous[(report["suite"], report["target"])] = report
        # Storage may have come back during the run: without its tables the backlog would be
        # refused for good rather than written.
        await self.ensure_schema()
        saved = await asyncio.to_thread(self.writer.write, report)
        if not saved:
            log.warning(
                "storage unreachable; run kept in memory until it returns",
                run_id=report["run_id"],
                pending=self.writer.pending,
            )
        return saved

    async def flush(self) -> None:
        if await self.ensure_schema() and self.writer.pending:
            written = await asyncio.to_thread(self.writer.flush)
            if written:
                log.info("wrote buffered runs to storage", runs=written)

    async def baseline(self, pair: Pair, mode: str) -> dict[str, Any] | None:
        """The report ``pair``'s next run is compared with: pinned, or the previous answered run."""
        if mode == "previous":
            if pair not in self._previous:
                found = await self.call(self.store.latest_run, *pair, exclude_unavailable=True)
                full = await self.call(self.store.get_report, found["run_id"]) if found else None
                if full:
                    self._previous[pair] = full
            return self._previous.get(pair)
        cached = self._pinned.get(pair)
        pinned = await self.call(self.store.get_baseline, *pair)
        if pinned is not None and (cached is None or cached["run_id"] != pinned):
            report = await self.call(self.store.get_report, pinned)
            if report:
                self._pinned[pair] = report
        return self._pinned.get(pair)

    async def pin_first_healthy(self, pair: Pair, report: dict[str, Any]) -> None:
        """Pin ``report`` when nobody pinned a baseline yet, so drift is watched from the start."""
        if pair in self._pinned or report["outcome"] != "ok":
            return
        if await self.call(self.store.get_baseline, *pair) is not None:
            return
        if await self.call(self.store.set_baseline, *pair, report["run_id"]) is None:
            self._pinned[pair] = report
            log.info(
                "no baseline pinned yet: pinned this first healthy run "
                "(`ragcanary baseline accept` pins another)",
                suite=pair[0],
                target=pair[1],
                run_id=report["run_id"],
            )

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` (admin API); raises StorageError so the caller can answer 503."""
        await asyncio.to_thread(self.store.set_baseline, suite, target, run_id)
        self._pinned.pop((suite, target), None)

    async def prune(self, now: datetime, keep: timedelta, keep_failed: timedelta) -> None:
        """Delete runs past the retention; pinned baselines and recent failures stay."""
        deleted = await self.call(self.store.prune, now, keep, keep_failed)
        if deleted:
            log.info("pruned old runs", runs=deleted)

    async def close(self) -> None:
        await self.flush()
        if self.writer.pending:
            log.error(
                "storage unreachable at shutdown; unsaved runs lost", runs=self.writer.pending
            )
        await asyncio.to_thread(self.store.close)

    def _dropped(self, report: dict[str, Any]) -> None:
        log.error(
            "storage buffer full: dropped the oldest unsaved run",
            run_id=report.get("run_id"),
            suite=report.get("suite"),
            target=report.get("target"),
        )

    def _rejected(self, report: dict[str, Any], error: Exception) -> None:
        log.error(
            "storage refused a run; it is not retried",
            run_id=report.get("run_id"),
            error=str(error),
        )
