"""Where the daemon keeps runs: storage behind the outage buffer, and baselines to compare with."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.run_report import RunReport
from ragcanary.store.buffer import BufferedWriter
from ragcanary.store.errors import StorageError
from ragcanary.store.spool import Contents, Spool
from ragcanary.store.storage import Store
from ragcanary.threads import run_in

log = structlog.get_logger("ragcanary")

Pair = tuple[str, str]  # (suite, target)


@dataclass(frozen=True)
class KeptReport:
    """A baseline's report kept between runs as its JSON text, read back when it is needed.

    Kept as objects, every pair's baseline report made up most of what the garbage collector
    visits in a daemon of 200 pairs (hundreds of thousands of containers), and its pauses held
    up the event loop and so the scrapes: docs/performance.md, "Scale of one daemon". As text
    it is one object to the collector, and smaller. The judge reads it once per pin.
    """

    run_id: str
    started_at: datetime
    text: str

    @classmethod
    def of(cls, report: RunReport) -> KeptReport:
        text = json.dumps(marshal(report), separators=(",", ":"))
        return cls(report.run_id, report.started_at, text)

    def report(self) -> RunReport:
        return unmarshal(json.loads(self.text))


class RunKeeper:
    """Stores runs without ever blocking or failing a run, and finds each pair's baseline.

    Storage is called in a thread. Once a call finds it unreachable (or unwritable) the keeper
    counts it *down*: runs then wait in the buffer without trying storage, and baselines come
    from memory, so no run waits for a storage deadline. ``retry`` (the daemon calls it with
    backoff) writes the buffer once storage accepts writes again. At shutdown the runs still
    waiting go to the spool file, which ``replay_spool`` reads back at the next start.
    Nothing here raises a storage error.
    """

    def __init__(
        self,
        store: Store,
        capacity: int = 1000,
        *,
        spool: Spool | None = None,
        on_error: Callable[[str], None] = lambda _operation: None,
    ) -> None:
        self.store = store
        self.writer = BufferedWriter(
            store, capacity, on_drop=self._dropped, on_reject=self._rejected
        )
        # Runs are written one at a time anyway (the writer keeps their order, and SQLite has
        # one writer): in a thread of their own, writes waiting their turn do not fill the
        # default pool, where a run's first read (its baseline) would queue behind them.
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="ragcanary-store-writes")
        self.spool = spool
        self.down = False
        self._on_error = on_error
        self._pinned: dict[Pair, KeptReport] = {}
        self._previous: dict[Pair, KeptReport] = {}
        self._following: set[Pair] = set()  # pairs whose baseline is their previous run
        self._migrated = False
        self._check: asyncio.Task[str | None] | None = None
        self.last_error: str | None = None  # why storage last failed, for /readyz
        self._replayed = False  # runs of the spool were queued and may not all be stored yet

    @property
    def pending(self) -> int:
        """Runs waiting for storage."""
        return self.writer.pending

    async def ensure_schema(self) -> bool:
        """Create or upgrade the tables once storage is reachable; whether they exist now."""
        if not self._migrated:
            try:
                await run_in(None, self.store.migrate)
            except StorageError as exc:
                self._failed(
                    "write", exc, "storage unreachable; runs are buffered until it returns"
                )
                return False
            self._migrated = True
        return True

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call storage in a thread; an outage (known or new) is answered with None."""
        if self.down:
            return None
        try:
            if not await self.ensure_schema():
                return None
            return await run_in(None, fn, *args, **kwargs)
        except StorageError as exc:
            self._failed("read", exc, "storage unreachable", call=fn.__name__)
            return None

    async def save(self, report: RunReport) -> bool:
        """Store ``report`` after any backlog, in order; False when it had to wait in memory."""
        pair = report.pair
        if pair in self._following and report.outcome != "unavailable":
            self._previous[pair] = KeptReport.of(report)
        saved = False
        if self.down:
            self.writer.hold(report)
        elif await self.ensure_schema():
            saved = await run_in(self._writes, self.writer.write, report)
            if not saved and self.writer.pending:
                self._failed("write", self.writer.last_error, "storage refused a write")
        else:
            self.writer.hold(report)
        if not saved:
            log.warning(
                "storage unreachable; run kept in memory until it returns",
                run_id=report.run_id,
                pending=self.writer.pending,
                error=self.last_error,
            )
        return saved

    async def retry(self) -> bool:
        """Write waiting runs if storage takes writes again; True once nothing waits.

        While nothing waits and storage was not found down, this costs nothing.
        """
        if not self.down and not self.writer.pending:
            self._spool_stored()
            return True
        if not await self.ensure_schema():
            return False
        try:
            if self.writer.pending:
                written = await run_in(self._writes, self.writer.flush)
                if written:
                    log.info("wrote buffered runs to storage", runs=written)
            else:
                await run_in(None, self.store.check_write)
        except StorageError as exc:
            self._failed("write", exc, "storage still unavailable")
            return False
        if self.writer.pending:
            self._failed("write", self.writer.last_error, "storage still unavailable")
            return False
        if self.down:
            log.info("storage is back: runs are stored again")
        self.down = False
        self._spool_stored()
        return True

    def _spool_stored(self) -> None:
        """Every run the spool held is stored: it has done its job."""
        if self._replayed and self.spool is not None:
            self._replayed = False
            try:
                self.spool.remove()
            except OSError as exc:
                log.error(
                    "cannot delete the spool file; its runs are stored, and the next start "
                    "stores them again (harmless)",
                    spool=str(self.spool.path),
                    error=exc.strerror,
                )

    async def writable(self, deadline_s: float) -> str | None:
        """None when storage takes a write within ``deadline_s``, else why not (``/readyz``).

        At most one check runs at a time: readiness probes arriving while storage hangs share
        it rather than piling up threads that each wait for a storage deadline.
        """
        if self._check is None or self._check.done():
            self._check = asyncio.get_running_loop().create_task(self._write_check())
        try:
            return await asyncio.wait_for(asyncio.shield(self._check), deadline_s)
        except TimeoutError:
            return f"storage did not answer a write within {deadline_s:g}s"

    async def _write_check(self) -> str | None:
        if not await self.ensure_schema():
            return self.last_error or "the tables could not be created or upgraded"
        try:
            await run_in(None, self.store.check_write)
        except StorageError as exc:
            self._on_error("check")
            return str(exc)
        # The check's row committed; store what waits now. Ready only once that is stored too:
        # a run writes more than the check, and a disk can be full for one and not the other
        # (PostgreSQL puts a small row where a page has room, and cannot extend the table).
        if (self.down or self.writer.pending) and not await self.retry():
            return self.last_error or "storage does not take the runs waiting for it"
        return None

    def replay_spool(self) -> int:
        """Queue the runs a previous process spooled at shutdown; how many there were.

        What cannot be read is skipped, logged and counted once (operation ``spool``), and the
        spool as it was is kept aside as ``.bad``; nothing here raises.
        """
        if self.spool is None:
            return 0
        contents = self.spool.read()
        if contents.skipped:
            self._skip(self.spool, contents)
        reports = contents.reports
        for report in reports:
            self.writer.hold(report)
        self._replayed = bool(reports)
        if reports:
            log.info(
                "runs spooled by the previous process are waiting for storage",
                runs=len(reports),
                spool=str(self.spool.path),
            )
        return len(reports)

    def _skip(self, spool: Spool, contents: Contents) -> None:
        """Keep an unreadable spool (or its unreadable lines) aside; log and count each."""
        kept: str | None = None
        why_not_kept: str | None = None
        try:
            kept = str(spool.set_aside(contents))
        except OSError as exc:
            why_not_kept = (
                f"it could not be kept aside ({exc.strerror}), so the spool is left as it is"
            )
        for skipped in contents.skipped:
            self._on_error("spool")
            log.error(
                "spool file skipped: it cannot be read"
                if skipped.line is None
                else "spool line skipped: it cannot be read",
                spool=str(spool.path),
                line=skipped.line,
                reason=f"{'the file' if skipped.line is None else 'the line'} {skipped.reason}",
                kept_at=kept,
                **({"error": why_not_kept} if why_not_kept else {}),
            )

    async def baseline(self, pair: Pair, mode: str) -> KeptReport | None:
        """The report ``pair``'s next run is compared with: pinned, or the previous answered run."""
        if mode == "previous":
            self._following.add(pair)
            # Storage may hold a newer run than this process saw: another replica's.
            found = await self.call(self.store.latest_run, *pair, exclude_unavailable=True)
            if found is not None and _newer(found, self._previous.get(pair)):
                full = await self.call(self.store.get_report, found["run_id"])
                if full:
                    self._previous[pair] = KeptReport.of(full)
            return self._previous.get(pair)
        self._following.discard(pair)
        self._previous.pop(pair, None)
        cached = self._pinned.get(pair)
        pinned = await self.call(self.store.get_baseline, *pair)
        if pinned is not None and (cached is None or cached.run_id != pinned):
            report = await self.call(self.store.get_report, pinned)
            if report:
                self._pinned[pair] = KeptReport.of(report)
        return self._pinned.get(pair)

    async def pin_first_healthy(self, pair: Pair, report: RunReport) -> None:
        """Pin ``report`` when nobody pinned a baseline yet, so drift is watched from the start.

        While storage is down the pin is kept in memory only.
        """
        if pair in self._pinned or report.outcome != "ok":
            return
        if await self.call(self.store.get_baseline, *pair) is not None:
            return
        await self.call(self.store.set_baseline, *pair, report.run_id)
        self._pinned[pair] = KeptReport.of(report)
        log.info(
            "no baseline pinned yet: pinned this first healthy run "
            "(`ragcanary baseline accept` pins another)",
            suite=pair[0],
            target=pair[1],
            run_id=report.run_id,
        )

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` (admin API); raises StorageError so the caller can answer 503."""
        await run_in(None, self.store.set_baseline, suite, target, run_id)
        self._pinned.pop((suite, target), None)

    async def prune(self, now: datetime, keep: timedelta, keep_failed: timedelta) -> None:
        """Delete runs past the retention; pinned baselines and recent failures stay.

        In a worker thread, each of its write transactions queued in the writes thread among
        the runs being stored, so a run waits for one of them at most, never for the prune.
        """
        deleted = await self.call(self.store.prune, now, keep, keep_failed, write=self._queued)
        if deleted:
            log.info("pruned old runs", runs=deleted)

    def _queued(self, step: Callable[[], int]) -> int:
        """Run ``step`` in the writes thread, after the writes queued before it."""
        try:
            return self._writes.submit(step).result()
        except RuntimeError:  # the keeper is closing: its writes thread takes nothing more
            raise StorageError("storage is closing; the prune stops here") from None

    async def close(self, deadline_s: float = 5.0) -> None:
        """Write what waits within ``deadline_s``, spool the rest, close storage."""
        started = time.monotonic()
        if self.writer.pending:
            try:
                await asyncio.wait_for(self.retry(), deadline_s)
            except TimeoutError:
                log.warning("storage did not take the buffered runs in time", pending=self.pending)
        waiting = self.writer.snapshot()
        if waiting and self.spool is not None:
            try:
                self.spool.replace(waiting)
            except OSError as exc:
                log.error(
                    "cannot write the spool file; unsaved runs lost",
                    runs=len(waiting),
                    spool=str(self.spool.path),
                    error=exc.strerror,
                )
            else:
                log.warning(
                    "storage unavailable at shutdown; runs spooled for the next start",
                    runs=len(waiting),
                    spool=str(self.spool.path),
                )
        elif waiting:
            log.error("storage unreachable at shutdown; unsaved runs lost", runs=len(waiting))
        else:
            self._spool_stored()
        remaining = max(0.5, deadline_s - (time.monotonic() - started))
        try:
            await asyncio.wait_for(run_in(None, self.store.close), remaining)
        except TimeoutError:
            log.warning("storage connections did not close in time")
        self._writes.shutdown(wait=False)

    def _failed(
        self, operation: str, exc: StorageError | None, message: str, **fields: Any
    ) -> None:
        self._on_error(operation)
        if exc is not None:
            self.last_error = str(exc)
        if not self.down:
            log.warning(message, error=str(exc) if exc else None, **fields)
        self.down = True

    def _dropped(self, report: RunReport) -> None:
        log.error(
            "storage buffer full: dropped the oldest unsaved run",
            run_id=report.run_id,
            suite=report.suite,
            target=report.target,
        )

    def _rejected(self, report: RunReport, error: Exception) -> None:
        log.error(
            "storage refused a run; it is not retried",
            run_id=report.run_id,
            error=str(error),
        )


def _newer(stored: Mapping[str, Any], seen: KeptReport | None) -> bool:
    """Whether the stored run summary ``stored`` started after the report ``seen``."""
    if seen is None:
        return True
    if stored["run_id"] == seen.run_id:
        return False
    seen_at = seen.started_at
    if seen_at.tzinfo is None:
        seen_at = seen_at.replace(tzinfo=UTC)
    started: datetime = stored["started_at"]
    return started > seen_at
