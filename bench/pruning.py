"""Pruning a day of runs while runs are stored: how long each save waits, how late the loop runs.

Part of the storage benchmark (``storage.py`` runs and renders it). Issue 37's goal: pruning a
day of runs never delays a scheduled run by more than 100 ms. The store holds what a daemon
keeping one day of runs holds just before its daily prune: two days of runs of 1,000 canaries
every 5 minutes, and the shared values first stored in the day before them (the previous
prune deleted that day's runs; its values go a day later, ``store.pruning``). It is filled in
bulk (``bulk``), the oldest day then pruned by ``Store.prune`` itself.

Then, as the daemon does, on an asyncio loop: ``Store.prune`` runs in the loop's shared
thread pool (``RunKeeper.prune`` → ``call``), each of its write transactions queued in the
writes thread, where a new run of every canary is saved every 0.5 s (``RunKeeper.save``'s
single writer thread), and a ticker on the
loop measures how late each of its 10 ms timers fires. First ``UNLOADED_SAVES`` saves run
without the prune: their median is a save's unloaded time, and a save's delay is how much
longer it took, from the moment it was due to its commit (waiting behind an earlier save
included). The statements of the prune are timed too, to tell what a save waits for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import bulk
import sqlalchemy
from history import EVERY_S, VARIANTS, Canary, canaries, database, report, run_head
from render import table, verdict
from sqlalchemy import event, func, select

from ragcanary.measure.run_report import RunReport
from ragcanary.store.engine import make_engine
from ragcanary.store.errors import StorageError
from ragcanary.store.pruning import VALUES_BATCH
from ragcanary.store.schema import rankings, run_parts
from ragcanary.store.storage import PRUNE_BATCH, Store
from ragcanary.threads import run_in

GOAL_MS = 100.0
KEEP = timedelta(days=1)
ROUNDS = 3  # days pruned one after the other, a day apart, each while saving
# The day pruned before the first round (its values remain), a day per round, the day kept.
DAYS_FILLED = ROUNDS + 2
SAVE_EVERY_S = 0.5
UNLOADED_SAVES = 10
TICK_S = 0.01
POOL_REPORTS = 20  # different runs saved in turn (each under a new run id and time)
WRITER = "bench-store-writes"  # the saving thread's name; the prune runs in others
FULL_CANARIES = 1000
QUICK_CANARIES = 100


def fill(url: str, suite: list[Canary], now: datetime, seed: int = 3) -> float:
    """DAYS_FILLED days of runs of ``suite`` every EVERY_S before ``now``; seconds it took."""
    rng = random.Random(seed)
    steps = DAYS_FILLED * 86_400 // EVERY_S
    template = report("template", now, suite, [rng.randrange(VARIANTS) for _ in suite])
    start = time.perf_counter()
    with bulk.filling(url) as conn:
        numbers = bulk.numbering(conn, "core", [canary.case.id for canary in suite])
        batch: list[bulk.Numbered] = []
        for step in range(steps):
            started_at = now - timedelta(seconds=EVERY_S * (steps - step))
            answered = [c.answers[rng.randrange(VARIANTS)] for c in suite]
            batch.append(
                numbers.number(run_head(template, f"run-{step:06d}", started_at), answered)
            )
            if len(batch) * len(suite) >= 50_000 or step == steps - 1:
                bulk.write(conn, batch, numbers)
                batch = []
    return time.perf_counter() - start


def measure(backend: str, count: int) -> dict[str, Any]:
    """Fill a store on ``backend`` with ``count`` canaries, then prune its oldest day while
    saving, ROUNDS times a day apart; the figures of every round together."""
    suite = canaries(count)
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(4)
    pool = [
        report(f"pool-{n}", now, suite, [rng.randrange(VARIANTS) for _ in suite])
        for n in range(POOL_REPORTS)
    ]
    # The benchmark's own data out of the collector's sight: its collections cost what a
    # daemon's would, not a scan of a thousand canaries' reports.
    gc.freeze()
    rounds: list[Round] = []
    with database(backend) as url:
        with Store.from_url(url) as store:
            store.migrate()
        print(f"  {backend}: filling {count} canaries x {DAYS_FILLED} days", flush=True)
        fill_s = fill(url, suite, now)
        engine = make_engine(url)  # pooled, as the daemon's store is
        with Store(engine) as store:
            statements = Statements(engine)
            # The prune the day before the first round's, not measured.
            store.prune(now - ROUNDS * KEEP, KEEP, KEEP)
            for n in range(ROUNDS):
                _settle(engine)  # a day later, the last prune's dead rows are vacuumed
                values = _values(store)
                at = now - (ROUNDS - 1 - n) * KEEP
                rounds.append(asyncio.run(_prune_while_saving(store, pool, at, statements, n)))
                rounds[-1].values_deleted = values - _values(store)
                print(f"  {backend}: {rounds[-1]}", flush=True)
    gc.unfreeze()
    delays = [d for r in rounds for d in r.delays]
    lags = [lag for r in rounds for lag in r.lags]
    return {
        "canaries": count,
        "fill_s": fill_s,
        "rounds": len(rounds),
        "prune_s": [r.prune_s for r in rounds],
        "runs_deleted": [r.runs_deleted for r in rounds],
        "values_deleted": [r.values_deleted for r in rounds],
        "save_unloaded_ms": [r.unloaded_ms for r in rounds],
        # Without the prune: more than a few ms means saves vary, or queue behind each other.
        "save_unloaded_delay_max_ms": max(d for r in rounds for d in r.alone),
        "saves": len(delays),
        "failed_saves": [error for r in rounds for error in r.failed],
        "save_delays_ms": [[round(d, 1) for d in r.delays] for r in rounds],
        "save_delay_p99_ms": _p99(delays),
        "save_delay_max_ms": max(delays, default=0.0),
        # Beyond its unloaded time, the save itself (not waiting behind an earlier one).
        "save_own_delay_max_ms": max((d for r in rounds for d in r.own), default=0.0),
        "lag_unloaded_max_ms": max(lag for r in rounds for lag in r.idle_lags),
        "lag_p99_ms": _p99(lags),
        "lag_max_ms": max(lags, default=0.0),
        "prune_statements": statements.summary(),
    }


@dataclasses.dataclass
class Round:
    """One prune of a day while saving: its figures, times in ms but the prune's."""

    prune_s: float
    runs_deleted: int
    unloaded_ms: float  # a save's unloaded time: the median before the prune
    alone: list[float]  # the delays of the saves before the prune
    delays: list[float]  # of those due while the prune ran, from due to commit
    own: list[float]  # of the same, the save itself (not waiting behind an earlier one)
    failed: list[str]
    idle_lags: list[float]  # the loop's before the prune
    lags: list[float]  # the loop's while the prune ran
    values_deleted: int = 0

    def __str__(self) -> str:
        return (
            f"pruned {self.runs_deleted} runs in {self.prune_s:.1f} s; save delay max "
            f"{max(self.delays, default=0):.0f} ms, loop lag max {max(self.lags, default=0):.0f} ms"
        )


class Statements:
    """How long the prune's statements took, by kind (the statement's first words), while
    ``active``: what holds SQLite's write lock, or PostgreSQL's rows and CPU, meanwhile."""

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        self.active = False
        self._took: dict[str, list[float]] = defaultdict(list)
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        conn.info["bench_started"] = time.perf_counter()

    def _after(self, conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if self.active and not threading.current_thread().name.startswith(WRITER):
            kind = " ".join(statement.split()[:4])
            self._took[kind].append(time.perf_counter() - conn.info["bench_started"])

    def summary(self) -> dict[str, dict[str, float]]:
        """Per kind: how many ran, their total and longest time in ms; longest total first."""
        rows = {
            kind: {"count": len(t), "total_ms": sum(t) * 1000, "max_ms": max(t) * 1000}
            for kind, t in self._took.items()
        }
        return dict(sorted(rows.items(), key=lambda item: -item[1]["total_ms"]))


def _settle(engine: sqlalchemy.Engine) -> None:
    """What a day after the previous prune looks like: SQLite's WAL checkpointed, PostgreSQL's
    dead rows vacuumed and statistics current (autovacuum's work)."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            return
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")


def _values(store: Store) -> int:
    with store.reading() as conn:
        return sum(
            int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for table in (rankings, run_parts)
        )


async def _prune_while_saving(
    store: Store, pool: list[RunReport], now: datetime, statements: Statements, label: int
) -> Round:
    loop = asyncio.get_running_loop()
    writes = ThreadPoolExecutor(1, thread_name_prefix=WRITER)
    lags: list[tuple[float, float]] = []  # when a tick fired, how late
    # When due, seconds to commit, seconds of it the save itself took, error.
    saves: list[tuple[float, float, float, str | None]] = []
    numbers = itertools.count()
    ticking = True

    def tick(due: float) -> None:
        fired = loop.time()
        lags.append((fired, fired - due))
        if ticking:
            loop.call_later(TICK_S, tick, fired + TICK_S)

    async def save(due: float) -> None:
        n = next(numbers)
        made = dataclasses.replace(
            pool[n % len(pool)], run_id=f"save-{label}-{n:04d}", started_at=datetime.now(UTC)
        )
        error, took = None, 0.0

        def timed() -> None:
            nonlocal took
            started = time.perf_counter()
            try:
                store.save_run(made)
            finally:
                took = time.perf_counter() - started

        try:
            await run_in(writes, timed)
        except StorageError as exc:
            error = str(exc)
        saves.append((due, loop.time() - due, took, error))

    async def saving(more: Callable[[int], bool]) -> None:
        tasks, start = [], loop.time()
        for k in itertools.count():
            due = start + k * SAVE_EVERY_S
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not more(k):
                break
            tasks.append(asyncio.create_task(save(due)))
        await asyncio.gather(*tasks)

    async def pruned() -> tuple[int, float]:
        statements.active = True
        try:
            # As RunKeeper.prune: its writes queued in the writes thread among the saves.
            deleted = await run_in(
                None, store.prune, now, KEEP, KEEP, write=lambda step: writes.submit(step).result()
            )
        finally:
            statements.active = False
        return deleted, loop.time()

    loop.call_later(TICK_S, tick, loop.time() + TICK_S)
    idle_from = loop.time()
    await saving(lambda k: k < UNLOADED_SAVES)
    idle_to = prune_from = loop.time()
    pruning = asyncio.create_task(pruned())
    await saving(lambda _k: not pruning.done())
    deleted, prune_to = await pruning
    ticking = False
    writes.shutdown()
    unloaded = statistics.median(waited for _due, waited, _took, _e in saves[:UNLOADED_SAVES])
    during = saves[UNLOADED_SAVES:]
    return Round(
        prune_s=prune_to - prune_from,
        runs_deleted=deleted,
        unloaded_ms=unloaded * 1000,
        alone=[(waited - unloaded) * 1000 for _due, waited, _t, _e in saves[:UNLOADED_SAVES]],
        delays=[(waited - unloaded) * 1000 for _due, waited, _took, _error in during],
        own=[(took - unloaded) * 1000 for _due, _waited, took, _error in during],
        failed=[error for *_times, error in during if error],
        idle_lags=[late * 1000 for at, late in lags if idle_from <= at <= idle_to],
        lags=[late * 1000 for at, late in lags if prune_from <= at <= prune_to],
    )


def _span(values: list[Any], form: str) -> str:
    """``values`` as one figure when they are equal, else their range."""
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low} to {high}"


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return max(values, default=0.0)
    return statistics.quantiles(values, n=100, method="inclusive")[98]


# Rendering (within the storage benchmark's section) -------------------------------------------

_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
# What the prune's statements do, by their first words (Statements' kinds).
_DOING = {
    "SELECT rankings.ranking_key FROM rankings": "finding rankings no remaining run refers to",
    "DELETE FROM rankings WHERE": "deleting those rankings",
    "DELETE FROM answers WHERE": "deleting a batch of runs' answers",
    "DELETE FROM runs WHERE": "deleting a batch of runs",
    "SELECT runs.run_id, runs.run_key, runs.suite": "finding the next batch of runs",
}


def render(measured: dict[str, dict[str, Any]]) -> tuple[str, str, str]:
    """What was measured, the table of figures and what they mean, for storage.render."""
    rows, said = [], []
    for backend, m in measured.items():
        # What the prune did, not what it waited for (a save's lock).
        slowest = [
            (kind, f)
            for kind, f in m["prune_statements"].items()
            if not kind.startswith("BEGIN") and "advisory" not in kind
        ][:2]
        runs, values, took = m["runs_deleted"], m["values_deleted"], m["prune_s"]
        rows.append(
            [
                _NAMES[backend],
                f"{_span(runs, '{:,}')} runs, {_span([r * m['canaries'] for r in runs], '{:,}')} "
                f"answers, {_span(values, '{:,}')} values",
                _span(took, "{:,.1f}"),
                f"{statistics.median(m['save_unloaded_ms']):,.0f} "
                f"({m['save_unloaded_delay_max_ms']:,.0f})",
                f"{m['save_delay_p99_ms']:,.0f} / {m['save_delay_max_ms']:,.0f} "
                f"({verdict(m['save_delay_max_ms'], GOAL_MS)})",
                f"{m['save_own_delay_max_ms']:,.0f}",
                f"{m['lag_p99_ms']:,.0f} / {m['lag_max_ms']:,.0f} "
                f"({verdict(m['lag_max_ms'], GOAL_MS)})",
            ]
        )
        over = m["save_delay_max_ms"] - GOAL_MS
        said.append(
            f"On {_NAMES[backend]} a prune took {_span(took, '{:,.1f}')} s; the {m['saves']} "
            "saves due while the prunes ran were delayed by at most "
            f"{m['save_delay_max_ms']:,.0f} ms "
            + (f"({over:,.0f} ms over the goal)" if over > 0 else "(within the goal)")
            + f", the event loop by at most {m['lag_max_ms']:,.0f} ms. Its statements that "
            "took longest in all (waiting for a lock aside): "
            + "; ".join(
                f"{_DOING.get(kind, kind)} ({f['count']} statements, "
                f"{f['total_ms']:,.0f} ms, the longest {f['max_ms']:,.0f} ms)"
                for kind, f in slowest
            )
            + "."
        )
        if m["failed_saves"]:
            said.append(f"{len(m['failed_saves'])} saves failed: {m['failed_saves'][0]}.")
        if m["save_delay_max_ms"] > m["save_own_delay_max_ms"] + GOAL_MS:
            said.append(
                f"The saves queued behind each other: a save alone takes "
                f"{statistics.median(m['save_unloaded_ms']):,.0f} ms of the {SAVE_EVERY_S:g} s "
                "between saves here, "
                "so one the prune slows delays the next ones too, and the delay grows while "
                "the prune lasts; each save itself was delayed by at most "
                f"{m['save_own_delay_max_ms']:,.0f} ms."
            )
    table_ = table(
        [
            "pruning a day",
            "deleted by each prune",
            "each prune took, s",
            "a save alone, ms (its worst delay without the prune)",
            f"save delay p99 / max, ms (goal ≤ {GOAL_MS:g})",
            "the save itself, its worst delay, ms",
            f"event-loop lag p99 / max, ms (goal ≤ {GOAL_MS:g})",
        ],
        rows,
    )
    count = next(iter(measured.values()))["canaries"] if measured else FULL_CANARIES
    what = (
        f"Then pruning, whose goal (issue 37) is that pruning a day of runs never delays a "
        f"scheduled run by more than {GOAL_MS:g} ms. A store holds what a daemon keeping one "
        "day of runs holds before its daily prune: two days of runs of "
        f"{count:,} canaries every {EVERY_S // 60} minutes (the history benchmark's canaries: "
        f"depth 10, each answering with one of {VARIANTS} rankings at random, so each canary "
        f"stores {VARIANTS} rankings a day) and the shared values first stored in the day "
        "before, whose runs an earlier prune deleted (values go a day after the last run that "
        "could refer to them); filled in bulk. On an asyncio loop, as the daemon runs it, "
        "`Store.prune` deletes the older day from the loop's thread pool, each of its write "
        "transactions queued in the writes thread (`RunKeeper.prune`), where a new run of "
        f"every canary is saved through `Store.save_run` every {SAVE_EVERY_S:g} s, and a "
        "ticker on the loop records how late each of its "
        f"{TICK_S * 1000:g} ms timers fires. A save's delay is its time from due to commit "
        f"less a save's unloaded time, the median of {UNLOADED_SAVES} saves before the prune. "
        f"This is done {ROUNDS} times, each prune's now a day after the last one's (the store "
        f"is filled with {DAYS_FILLED} days; the later days are the later prunes', and each "
        "prune's dead rows are vacuumed first, as a day later they would be), and the "
        "figures are of all the saves and ticks together."
    )
    meaning = " ".join(said) + (
        " A save waits for one of the prune's write transactions at most, the one the "
        "writes thread is running when it is queued: each deletes "
        f"{PRUNE_BATCH} runs (their {PRUNE_BATCH * count:,} answers) or {VALUES_BATCH:,} "
        "shared values. Finding the values no remaining run or ranking refers to is a read, "
        "in the prune's own thread, which holds no lock a save waits for (SQLite's WAL lets "
        "readers and the writer work at once); each delete then checks what was stored "
        "since (`store.pruning`). Before (the same benchmark, the search inside each write "
        "transaction and the prune's writes competing for SQLite's lock with the saves' "
        "writer thread) a save waited up to 1.2 s on SQLite and 2.6 s on PostgreSQL."
    )
    return what, table_, meaning
