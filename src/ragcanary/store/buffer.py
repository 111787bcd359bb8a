"""A bounded, ordered backlog of run reports that waits out storage outages."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ragcanary.measure.run_report import RunReport
from ragcanary.store.errors import StorageError, StorageUnavailable
from ragcanary.store.storage import Store

Report = RunReport


class BufferedWriter:
    """Saves reports to a Store in the order they were written, holding them while it is down.

    Synchronous and thread-safe: the daemon calls it in ``RunKeeper``'s writes thread. Memory is
    bounded: with ``capacity`` reports waiting, the oldest is dropped for each new one and
    ``on_drop`` is called with it. A report the store refuses for good (``StorageError`` other
    than ``StorageUnavailable``, e.g. a malformed report) would block everything behind it, so
    it is taken out and handed to ``on_reject`` (or ``on_drop`` when that is not given).
    Queued reports are kept by reference: do not mutate a report after writing it.
    """

    def __init__(
        self,
        store: Store,
        capacity: int = 1000,
        on_drop: Callable[[Report], None] | None = None,
        *,
        on_reject: Callable[[Report, StorageError], None] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._store = store
        self._capacity = capacity
        self._on_drop = on_drop
        self._on_reject = on_reject
        self._backlog: deque[Report] = deque()
        # Why storage last refused a save, so that whoever reports the outage can say why.
        self.last_error: StorageUnavailable | None = None
        # _lock guards the backlog only and is never held while storage is called, so that
        # ``hold`` and ``pending`` answer at once while a write hangs on a dead database.
        # _writing lets one writer at a time call storage, which keeps the order of saves.
        self._lock = threading.Lock()
        self._writing = threading.Lock()

    @property
    def pending(self) -> int:
        """How many reports wait for storage."""
        with self._lock:
            return len(self._backlog)

    def write(self, report: Report) -> bool:
        """Save the backlog, then ``report``; True when ``report`` itself was saved now.

        While storage is unavailable the report joins the backlog and False is returned.
        """
        with self._writing:
            self._flush()
            with self._lock:
                waiting = bool(self._backlog)
            if not waiting:
                try:
                    self._store.save_run(report)
                    return True
                except StorageUnavailable as error:
                    self.last_error = error
                except StorageError as error:
                    self._reject(report, error)
                    return False
            self.hold(report)
            return False

    def hold(self, report: Report) -> None:
        """Queue ``report`` behind the backlog without trying storage (it is known to be down)."""
        with self._lock:
            self._backlog.append(report)
            dropped = self._backlog.popleft() if len(self._backlog) > self._capacity else None
        if dropped is not None:
            self._drop(dropped)

    def snapshot(self) -> list[Report]:
        """The reports waiting now, oldest first (to spool them at shutdown)."""
        with self._lock:
            return list(self._backlog)

    def flush(self) -> int:
        """Save waiting reports in order until storage fails; return how many were saved."""
        with self._writing:
            return self._flush()

    def _flush(self) -> int:
        saved = 0
        while True:
            with self._lock:
                if not self._backlog:
                    return saved
                report = self._backlog[0]
            try:
                self._store.save_run(report)
            except StorageUnavailable as error:
                self.last_error = error
                return saved
            except StorageError as error:
                self._remove(report)
                self._reject(report, error)
                continue
            self._remove(report)
            saved += 1

    def _remove(self, report: Report) -> None:
        """Take ``report`` off the head (unless the capacity already dropped it)."""
        with self._lock:
            if self._backlog and self._backlog[0] is report:
                self._backlog.popleft()

    def _drop(self, report: Report) -> None:
        if self._on_drop is not None:
            self._on_drop(report)

    def _reject(self, report: Report, error: StorageError) -> None:
        if self._on_reject is not None:
            self._on_reject(report, error)
        else:
            self._drop(report)
