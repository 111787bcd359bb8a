"""A replica shows the pairs other replicas ran; alone, it reads them once, not every beat."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import pytest
from daemon_harness import idle_replica

from ragcanary.serve.replicas.heartbeats import Replicas
from ragcanary.store.storage import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingStore(Store):
    """PostgreSQL storage that counts how often the newest runs of every pair are read."""

    reads = 0

    def latest_runs(
        self, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[str, datetime]]]:
        self.reads += 1
        return super().latest_runs(pairs)


async def test_a_replica_alone_reads_the_newest_runs_once_and_again_once_others_beat(
    tmp_path: Path, postgres_url: str
) -> None:
    daemon = idle_replica(tmp_path, postgres_url)
    daemon.store.close()
    store = daemon.keeper.store = CountingStore.from_url(postgres_url)
    store.migrate()
    assert daemon.replicas is not None
    try:
        assert await daemon.replicas.beat()
        for _ in range(3):  # heartbeats while alone: the first reads, the others need not
            await daemon.show_others_runs()
        assert store.reads == 1
        other = Replicas(daemon.keeper, "another config")
        assert await other.beat()
        assert await daemon.replicas.beat()
        assert len(daemon.replicas.live) == 2
        await daemon.show_others_runs()
        await daemon.show_others_runs()
        assert store.reads == 3  # with another replica running jobs, at every heartbeat
    finally:
        await daemon.keeper.close()
