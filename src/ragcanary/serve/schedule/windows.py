"""The change windows a daemon knows open: which pairs are in maintenance, and a run's change.

Read from storage every few seconds and after every change this daemon records or finishes,
so every replica of one database holds the same pairs within that time. Between reads a
window still closes at its end, by the clock; while storage cannot answer, the windows last
read stay, each until its own end.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ragcanary.measure.run_report import Maintenance
from ragcanary.store.change_records import Change, open_windows
from ragcanary.store.changes import ChangeStore
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

WINDOWS_S = 2.0  # how often the open windows are read again

Pair = tuple[str, str]


class Windows:
    """The open change windows, as last read from storage."""

    def __init__(
        self, keeper: RunKeeper, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._keeper = keeper
        self._clock = clock
        self._open: list[Change] = []

    @property
    def changes(self) -> ChangeStore:
        return ChangeStore(self._keeper.store)

    async def refresh(self) -> bool:
        """Read the open windows again; False (keeping the last ones) when storage cannot."""
        found = await self._keeper.call(self.changes.open_at, self._clock())
        if found is None:
            return False
        self._open = list(found)
        return True

    def held(self, loaded: LoadedConfig) -> set[Pair]:
        """The configured (suite, target) pairs whose target a window open now names."""
        now = self._clock()
        targets = {t for change in open_windows(self._open, now) for t in change.targets}
        return {
            (suite, target)
            for suite, cfg in loaded.config.suites.items()
            for target in cfg.targets
            if target in targets
        }

    async def of_run(self, target: str, started_at: datetime) -> Maintenance | None:
        """The change whose window holds a run of ``target`` started at ``started_at`` (the
        latest started, when several do), asked of storage now; else None."""
        found = await self._keeper.call(self.changes.open_at, started_at)
        known = self._open if found is None else found
        for change in open_windows(known, started_at):
            if target in change.targets:
                return Maintenance(change.change_id, change.kind)
        return None
