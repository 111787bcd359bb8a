"""What the HTTP API needs of the daemon: a narrow protocol, so neither imports the other."""

from __future__ import annotations

from typing import Any, Protocol

from ragcanary.serve.http.live_search import OnAnswer
from ragcanary.serve.intake.queue import Intake
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.serve.replicas.heartbeats import Replicas
from ragcanary.serve.schedule.reloading import ReloadResult
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig


class Service(Protocol):
    """The running daemon as the API sees it (``serve.daemon.Daemon`` is one)."""

    @property
    def loaded(self) -> LoadedConfig:
        """The config in force (it changes on reload)."""
        ...

    @property
    def exporter(self) -> Exporter: ...

    @property
    def keeper(self) -> RunKeeper: ...

    @property
    def store(self) -> Store: ...

    @property
    def intake(self) -> Intake:
        """The queue of the application's failure reports."""
        ...

    @property
    def replicas(self) -> Replicas | None:
        """This daemon among its replicas (PostgreSQL storage), else None."""
        ...

    async def reload(self) -> ReloadResult:
        """Load the config again; the old one keeps running when the new one is refused."""
        ...

    def next_runs(self) -> list[dict[str, Any]]:
        """The schedule: each job and its next run time."""
        ...

    async def search(
        self, target: str, queries: list[str], depth: int, on_answer: OnAnswer
    ) -> None:
        """Ask ``target`` for each of ``queries`` now, within its limits; ``on_answer(index,
        answer)`` as each comes back (the candidates page's live results)."""
        ...

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` as the baseline of ``suite`` on ``target``."""
        ...
