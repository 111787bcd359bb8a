"""Replicas on one database: the same ticks on every replica, and the preference order."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy

from ragcanary.config.schedule import build_trigger
from ragcanary.serve.replicas.heartbeats import Peer, Replicas
from ragcanary.serve.schedule.grid import EPOCH, grid_offset_s, grid_trigger, tick_of
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 25, 12, 0, 0, 123_000, tzinfo=UTC)
JOBS = [f"suite-{i // 4}/target-{i % 4}" for i in range(20)]
JOB = "core/search"


def replica(replica_id: str) -> Replicas:
    store = Store(sqlalchemy.create_engine("sqlite://"))  # unused: the tests feed peers directly
    return Replicas(RunKeeper(store), "hash-1", replica_id=replica_id)


def peers(*ids: str, seen: datetime = NOW, config: str = "hash-1") -> list[Peer]:
    return [Peer(i, seen, config) for i in ids]


def test_every_replica_fires_a_job_at_its_phase_and_names_its_ticks_alike() -> None:
    """Two processes build the trigger apart and get the same fire times and ticks."""
    first, second = grid_trigger(60.0, 0.25), grid_trigger(60.0, 0.25)
    fire = first.get_next_fire_time(None, NOW)
    assert fire == second.get_next_fire_time(None, NOW)
    assert fire is not None
    assert (fire.second, fire.microsecond) == (15, 0)
    assert timedelta(0) < fire - NOW <= timedelta(seconds=60)
    tick = tick_of(JOB, first, fire)
    assert timedelta(0) <= fire - tick < timedelta(seconds=60)
    assert (tick - EPOCH) % timedelta(seconds=60) == offset(JOB)
    assert tick_of(JOB, first, fire + timedelta(seconds=2.5)) == tick  # a late start
    assert tick_of(JOB, first, fire - timedelta(milliseconds=10)) == tick  # a clock a hair early
    later = first.get_next_fire_time(fire, fire + timedelta(seconds=1))
    assert later == fire + timedelta(seconds=60)
    assert later is not None
    assert tick_of(JOB, first, later) == tick + timedelta(seconds=60)


def test_replicas_firing_a_job_at_other_moments_name_one_tick_per_interval() -> None:
    """Replicas whose configs differ (a roll-out) give a job other phases, and replicas of an
    older version fire it at its grid points: every firing in one interval of the job's grid
    still names that interval's tick, so the tick runs once."""
    grid = EPOCH + offset(JOB)
    tick = grid + (NOW - grid) // timedelta(seconds=60) * timedelta(seconds=60)
    older_version = offset(JOB) / timedelta(seconds=60)  # it fired at the grid points
    for phase in (0.0, 0.1, 0.37, 0.5, 0.99, older_version):
        trigger = grid_trigger(60.0, phase)
        fire = trigger.get_next_fire_time(None, tick)
        assert fire is not None
        assert tick <= fire < tick + timedelta(seconds=60)
        assert tick_of(JOB, trigger, fire) == tick, phase
        assert tick_of(JOB, trigger, fire + timedelta(seconds=59)) == tick, phase


def offset(job: str) -> timedelta:
    return timedelta(seconds=grid_offset_s(job, 60.0))


def test_jobs_are_spread_over_the_interval_by_their_name() -> None:
    offsets = {grid_offset_s(job, 60.0) for job in JOBS}
    assert len(offsets) == len(JOBS)
    assert all(0 <= o < 60 for o in offsets)


def test_a_cron_tick_is_its_fire_time_before_jitter() -> None:
    trigger = build_trigger(None, "*/5 * * * *")
    nominal = datetime(2026, 11, 25, 12, 5, tzinfo=UTC)
    for late in (0.0, 3.2, 9.9):
        assert tick_of(JOB, trigger, nominal + timedelta(seconds=late)) == nominal


def test_the_jobs_are_dealt_evenly_and_each_has_one_first_replica() -> None:
    replicas = [replica(name) for name in ("a", "b", "c")]
    for r in replicas:
        r.update(peers("a", "b", "c"), NOW)
    firsts: Counter[str] = Counter()
    for job in JOBS:
        turns = sorted(r.turn(job, JOBS) for r in replicas)
        assert turns == [0, 1, 2]
        firsts.update(r.replica_id for r in replicas if r.turn(job, JOBS) == 0)
    assert sorted(firsts.values()) == [6, 7, 7]


def test_a_replica_not_seen_lately_gets_no_turn_and_its_jobs_move() -> None:
    b = replica("b")
    b.update(peers("a", "b", "c"), NOW)
    before = {job for job in JOBS if b.turn(job, JOBS) == 0}
    b.update([*peers("a", "b"), *peers("c", seen=NOW - timedelta(seconds=30))], NOW)
    assert b.live == ("a", "b")
    after = {job for job in JOBS if b.turn(job, JOBS) == 0}
    assert len(after) == 10
    assert before != after


def test_a_replica_alone_runs_everything_at_once() -> None:
    lonely = replica("a")
    assert {lonely.turn(job, JOBS) for job in JOBS} == {0}


def test_another_configuration_is_logged_once(capsys: pytest.CaptureFixture[str]) -> None:
    a = replica("a")
    a.update([*peers("a"), *peers("b", config="hash-2")], NOW)
    a.update([*peers("a"), *peers("b", config="hash-2")], NOW)
    logged = capsys.readouterr().out
    assert logged.count("other replicas run another configuration") == 1


def test_a_cron_firing_handled_late_keeps_its_own_tick() -> None:
    trigger = build_trigger(None, "*/5 * * * *")
    nominal = datetime(2026, 11, 25, 12, 5, tzinfo=UTC)
    assert tick_of(JOB, trigger, nominal + timedelta(seconds=40)) == nominal
    assert tick_of(JOB, trigger, nominal + timedelta(minutes=4, seconds=59)) == nominal
