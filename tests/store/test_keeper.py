"""RunKeeper's baselines when several replicas store runs of one pair in one database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_storage import NOW, make_report

from ragcanary.store.keeper import RunKeeper
from ragcanary.store.storage import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_previous_run_is_the_newest_stored_whichever_replica_ran_it(
    store: Store,
) -> None:
    mine, theirs = RunKeeper(store), RunKeeper(store)
    pair = ("core", "search")
    await mine.save(make_report("r1", NOW))
    await theirs.save(make_report("r2", NOW + timedelta(minutes=1)))
    previous = await mine.baseline(pair, "previous")
    assert previous is not None
    assert previous["run_id"] == "r2"
    await mine.save(make_report("r3", NOW + timedelta(minutes=2)))
    assert (await theirs.baseline(pair, "previous") or {})["run_id"] == "r3"


async def test_a_run_not_stored_yet_stays_the_previous_one(store: Store) -> None:
    """A newer run this replica still buffers is not replaced by an older stored one."""
    keeper = RunKeeper(store)
    store.save_run(make_report("stored", NOW))
    keeper.down = True  # storage out of reach: the run waits in memory
    await keeper.save(make_report("buffered", NOW + timedelta(minutes=1)))
    keeper.down = False
    assert (await keeper.baseline(("core", "search"), "previous") or {})["run_id"] == "buffered"
