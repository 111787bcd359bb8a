"""A tick whose claimer died is run again, however late in its grid interval it was fired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy
from daemon_harness import idle_replica

from ragcanary.store.engine import make_engine
from ragcanary.store.schema import claims
from ragcanary.store.storage import Store

pytestmark = pytest.mark.anyio
JOB = "core/vendor"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_tick_fired_late_in_its_interval_is_run_again_after_its_claimer_died(
    tmp_path: Path, postgres_url: str
) -> None:
    """A job fires at its phase, up to an interval after the grid point that names its tick.
    A replica fired this one 55 s after its tick, claimed it, and died 30 s into the run (a
    slow target, a big suite); 13 s later the others count it dead. The tick must be run again
    all the same: 98 s after the tick, but 43 s after the claim."""
    daemon = idle_replica(tmp_path, postgres_url)
    daemon.store.migrate()
    now = datetime.now(UTC)
    tick = now - timedelta(seconds=98)  # a grid point, as far as the adoption can tell
    fired = tick + timedelta(seconds=55)
    dead = Store(make_engine(postgres_url), clock=lambda: fired)
    try:
        assert dead.claim(JOB, tick, "dead-replica", "never-stored")
    finally:
        dead.close()
    assert daemon.replicas is not None
    try:
        assert await daemon.replicas.beat()
        await daemon.rerun_orphans()
    finally:
        await daemon.shutdown()
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(sqlalchemy.select(claims).where(claims.c.job == JOB)).one()
    finally:
        engine.dispose()
    assert row.replica_id == daemon.replicas.replica_id
    assert row.run_id != "never-stored"
