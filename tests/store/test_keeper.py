"""RunKeeper's baselines: several replicas storing runs of one pair, and writes queued up."""

from __future__ import annotations

import asyncio
import sqlite3
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
    assert previous.run_id == "r2"
    await mine.save(make_report("r3", NOW + timedelta(minutes=2)))
    newest = await theirs.baseline(pair, "previous")
    assert newest is not None
    assert newest.run_id == "r3"


async def test_a_run_not_stored_yet_stays_the_previous_one(store: Store) -> None:
    """A newer run this replica still buffers is not replaced by an older stored one."""
    keeper, pair = RunKeeper(store), ("core", "search")
    store.save_run(make_report("stored", NOW))
    # As in the daemon, a run asks for its baseline before it is saved: the keeper learns
    # that the pair follows its previous run.
    assert await keeper.baseline(pair, "previous") is not None
    keeper.down = True  # storage out of reach: the run waits in memory
    await keeper.save(make_report("buffered", NOW + timedelta(minutes=1)))
    keeper.down = False
    previous = await keeper.baseline(pair, "previous")
    assert previous is not None
    assert previous.run_id == "buffered"


async def test_a_runs_baseline_is_read_while_other_runs_writes_wait_for_the_lock(
    sqlite_url: str,
) -> None:
    """Writes held up by another SQLite writer leave the default thread pool free for reads."""
    store = Store.from_url(sqlite_url)
    keeper = RunKeeper(store)
    await keeper.ensure_schema()
    store.save_run(make_report("pinned", NOW))
    store.set_baseline("core", "search", "pinned")
    # Another process (`ragcanary baseline accept`, a backup) holds SQLite's write lock.
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        # More runs end than the default pool has threads (at most 32).
        saves = [
            asyncio.ensure_future(keeper.save(make_report(f"r{i}", NOW + timedelta(seconds=i))))
            for i in range(40)
        ]
        await asyncio.sleep(0)  # one turn of the loop: every save hands its write to a thread
        pinned = await asyncio.wait_for(keeper.baseline(("core", "search"), "pinned"), 30)
        assert pinned is not None
        assert pinned.run_id == "pinned"
        assert not any(save.done() for save in saves)  # the read did not wait for them
    finally:
        other.execute("COMMIT")
        other.close()
    assert await asyncio.gather(*saves) == [True] * 40
    assert not keeper.down
    await keeper.close()
