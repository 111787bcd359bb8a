"""The run the exporter shows of each pair: this replica's newest, or another replica's."""

from __future__ import annotations

from datetime import datetime

from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.serve.replicas.heartbeats import Replicas
from ragcanary.serve.schedule.grid import EPOCH
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig


class ShownRuns:
    """Which run of each pair the exporter's gauges show, whichever replica ran it."""

    def __init__(self, keeper: RunKeeper, exporter: Exporter) -> None:
        self._keeper = keeper
        self._exporter = exporter
        self._shown: dict[tuple[str, str], datetime] = {}  # pair -> start of the run shown
        self.all_read = False  # every configured pair's newest run read since start or reload

    def ran(self, pair: tuple[str, str], started_at: datetime) -> None:
        """This replica ran ``pair`` at ``started_at``, and the exporter shows that run."""
        self._shown[pair] = max(started_at, self._shown.get(pair, EPOCH))

    async def show_others(self, loaded: LoadedConfig, replicas: Replicas) -> None:
        """Export the newest run of every pair, whichever replica ran it: gauges only, since
        counters stay each replica's own (rules sum them).

        A replica alone reads them once after its start or a reload: then it runs every job
        itself. Reading them at every heartbeat (a query or two per pair) held up the event
        loop, and so the scrapes, of a daemon of 200 pairs (docs/performance.md).
        """
        if self.all_read and len(replicas.live) == 1:
            return
        pairs = [(s, t) for s, cfg in loaded.config.suites.items() for t in cfg.targets]
        latest = await self._keeper.call(self._keeper.store.latest_runs, pairs)
        self.all_read = latest is not None
        for pair, runs in (latest or {}).items():
            for run_id, started_at in reversed(runs):  # the answered run first, then the newest
                shown = self._shown.get(pair)
                if shown is not None and started_at <= shown:
                    continue
                report = await self._keeper.call(self._keeper.store.get_report, run_id)
                if report is not None:
                    self._exporter.observe_run(report, counted=False)
                    self._shown[pair] = started_at
