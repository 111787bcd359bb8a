"""The daemon's life as one object: start, schedule canary runs, reload, stop cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import structlog
import uvicorn
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger

from ragcanary.config.model import SuiteConfig
from ragcanary.config.schedule import build_trigger
from ragcanary.errors import ConfigError
from ragcanary.logs import RedactSecrets
from ragcanary.probe.cycle import probe_cycle
from ragcanary.probe.presets import make_target
from ragcanary.probe.runner import TargetGate
from ragcanary.probe.target import make_client
from ragcanary.redact import Redactor
from ragcanary.reports.report import failure_kinds
from ragcanary.serve.config_export import (
    config_hash,
    interval_seconds,
    ui_base_url,
    verdict_thresholds,
)
from ragcanary.serve.exporter import Exporter, SuitePairs
from ragcanary.serve.httpserver import BACKLOG, guarded_protocol
from ragcanary.serve.index_checks import IndexChecks
from ragcanary.serve.intake import DEFAULT_REDACTIONS, Intake, IntakeSettings, Recount
from ragcanary.serve.judging import Judge
from ragcanary.serve.live_search import OnAnswer, search_now
from ragcanary.serve.reloading import Changes, ReloadResult, compare, job_id
from ragcanary.serve.replicas import (
    DEAD_AFTER_S,
    EPOCH,
    HEARTBEAT_S,
    Replicas,
    grid_trigger,
    takeover_s,
    tick_of,
)
from ragcanary.serve.stale_check import StaleLabels
from ragcanary.store.candidates import CandidateStore
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.lock import Lock, acquire
from ragcanary.store.spool import Spool, spool_path
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig, load_config

log = structlog.get_logger("ragcanary")

# A job's first run comes at its own moment of its first interval, which spreads jobs of the
# same interval evenly over it instead of starting them together and probing in bursts: at
# 200 jobs every minute, jobs started within 30 s kept the event loop saturated for half of
# every minute, and scrapes waited behind it (docs/performance.md, "Scale of one daemon").
# Capped so a long interval does not leave a fresh daemon idle for minutes.
MAX_START_JITTER_S = 60.0
GOLDEN_STEP = (5**0.5 - 1) / 2
PRUNE_EVERY_S = 3600.0
KEEP_ALIVE_S = 15  # idle keep-alive connections (a scraper reuses its own every scrape)
# Buffered runs are retried after this, doubling while storage refuses them, up to the max.
STORAGE_RETRY_S = 1.0
STORAGE_RETRY_MAX_S = 10.0
STORAGE_CLOSE_S = 5.0  # at shutdown: storing what waits, then spooling the rest
ORPHAN_SLACK_S = 30.0  # how far past the longest interval a dead replica's tick is re-run
INTAKE_FLUSH_S = 0.2  # failure reports are written in batches this often
PENDING_AFTER_CHANGE_S = 1.0  # while batches are stored, the pending gauge is read this often
PENDING_REFRESH_S = 15.0  # and at least this often (a review closes candidates elsewhere)


@dataclass(frozen=True)
class Claim:
    """A tick of a job this replica claimed, and the run id it runs it as."""

    job: str
    tick: datetime
    run_id: str
    claimed: bool = True  # False: run while storage was down, claimed when it is stored


@dataclass(frozen=True)
class JobKey:
    suite: str
    target: str

    @property
    def id(self) -> str:
        return job_id(self.suite, self.target)


def suite_pairs(loaded: LoadedConfig, now: datetime | None = None) -> dict[str, SuitePairs]:
    """What the exporter must know of each configured suite, its thresholds and interval too.

    ``now`` is where a cron schedule's interval is measured from (default: the current time).
    """
    at = now or datetime.now(UTC)
    return {
        name: SuitePairs(
            targets=tuple(cfg.targets),
            ks=tuple(cfg.k),
            per_case_metrics=cfg.per_case_metrics,
            case_ids=tuple(c.id for c in loaded.suites[name].cases),
            thresholds=verdict_thresholds(cfg),
            interval_seconds=interval_seconds(cfg, at),
        )
        for name, cfg in loaded.config.suites.items()
    }


def intake_settings(loaded: LoadedConfig) -> IntakeSettings:
    """The failure reports' bounds and redactions, from the config's ``candidates:``."""
    config = loaded.config.candidates
    redactions = (
        DEFAULT_REDACTIONS
        if config.redact is None
        else tuple((r.pattern, r.replace) for r in config.redact)
    )
    return IntakeSettings(config.max_pending, config.rate_limit, config.burst, redactions)


def trigger_for(suite: SuiteConfig) -> BaseTrigger:
    """The trigger of ``suite``'s schedule: the one ``validate`` built when it checked it."""
    return build_trigger(suite.every, suite.cron)


class _ApiServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the daemon owns SIGTERM, SIGINT and SIGHUP."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Daemon:
    """`ragcanary serve`: one process, one event loop, one object owning its whole life."""

    def __init__(
        self,
        config_file: Path,
        environ: Mapping[str, str],
        loaded: LoadedConfig,
        *,
        exporter: Exporter | None = None,
        redactor: RedactSecrets | None = None,
        grace_s: float = 20.0,
        rng: random.Random | None = None,
        client_factory: Callable[..., httpx.AsyncClient] = make_client,
        index_checks: IndexChecks | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.config_file = config_file
        self.environ = environ
        self.loaded = loaded
        self.exporter = exporter or Exporter()
        self.redactor = redactor or RedactSecrets()
        self.grace_s = grace_s
        self.rng = rng or random.Random()
        self._phase = self.rng.random()  # where the next job's first run falls in its interval
        self.client_factory = client_factory
        self.keeper = RunKeeper(
            Store.from_url(loaded.config.storage),
            spool=Spool(spool_path(loaded.config.storage, environ)),
            on_error=self.exporter.count_storage_error,
        )
        self._lock: Lock | None = None
        # On PostgreSQL every daemon is a replica: it claims each tick before running it.
        self.replicas = (
            Replicas(self.keeper, config_hash(loaded))
            if self.store.dialect == "postgresql"
            else None
        )
        self._replica_task: asyncio.Task[None] | None = None
        self.intake = Intake(
            CandidateStore(self.store),
            intake_settings(loaded),
            on_received=self.exporter.count_candidate,
            on_dropped=self.exporter.count_dropped_candidates,
        )
        self._intake_task: asyncio.Task[None] | None = None
        self._shown: dict[tuple[str, str], datetime] = {}  # pair -> start of the run shown
        self.stale = StaleLabels(self.keeper, self._look_up, index_checks)
        self.judge = judge or Judge()  # a run's evaluation and report, off the event loop
        self._storage_task: asyncio.Task[None] | None = None
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._gates: dict[str, TargetGate] = {}  # shared limits of each target across suites
        self._running: dict[str, asyncio.Task[None]] = {}
        self._closing: set[asyncio.Task[None]] = set()  # retired clients waiting for their runs
        self._stop = asyncio.Event()
        self._reloading = asyncio.Lock()  # one reload at a time, whether by API or SIGHUP
        self._sighups: set[asyncio.Task[ReloadResult]] = set()
        self._stopping = False
        self.server: uvicorn.Server | None = None
        self.redactor.update(loaded.secrets)

    @property
    def store(self) -> Store:
        return self.keeper.store

    # -- lifecycle -----------------------------------------------------------------------

    async def run(self) -> int:
        """Start, serve until asked to stop, shut down; the process exit code."""
        await self.startup()
        try:
            await self._stop.wait()
        finally:
            await self.shutdown()
        return 0

    async def startup(self) -> None:
        # Before anything listens or runs: a second daemon on this storage must change nothing.
        self._lock = await asyncio.to_thread(acquire, self.loaded.config.storage)
        self.keeper.replay_spool()
        await self.keeper.ensure_schema()
        self.exporter.set_buffered_runs(self.keeper.pending)
        self._storage_task = asyncio.get_running_loop().create_task(self._keep_storing())
        self._intake_task = asyncio.get_running_loop().create_task(self._keep_intake())
        if self.replicas is not None:
            await self.replicas.beat()
            self._replica_task = asyncio.get_running_loop().create_task(self._keep_in_touch())
        self._export_config(self.loaded)
        self.exporter.set_reload_result(True)
        self.scheduler.add_listener(self._on_overlap, EVENT_JOB_MAX_INSTANCES)
        self._schedule_all()
        self.scheduler.start()
        self._install_signals()
        await self._start_server()
        log.info(
            "started",
            config=str(self.config_file),
            listen=self.loaded.config.listen,
            jobs=[j["suite"] + "/" + j["target"] for j in self.next_runs()],
        )

    async def shutdown(self) -> None:
        """Stop scheduling, let the in-flight runs finish within the grace period, flush, exit."""
        self._stopping = True
        if self.scheduler.running:
            # Pause, not shut down: APScheduler's shutdown cancels the jobs in flight at once,
            # which would leave the grace period below nothing to wait for.
            self.scheduler.pause()
        running = [t for t in self._running.values() if not t.done()]
        if running:
            log.info("waiting for in-flight runs", runs=len(running), grace_s=self.grace_s)
            _done, pending = await asyncio.wait(running, timeout=self.grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
                log.warning(
                    "cancelled in-flight runs at the end of the grace period", runs=len(pending)
                )
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        for client in self._clients.values():
            await client.aclose()
        if self._closing:
            await asyncio.wait(self._closing, timeout=5)
        for background in (self._storage_task, self._replica_task, self._intake_task):
            if background is not None:
                background.cancel()
                await asyncio.wait([background], timeout=1)
        await self._flush_intake()
        if self.server is not None:
            self.server.should_exit = True
            if self._server_task is not None:
                await asyncio.wait([self._server_task], timeout=5)
        await self.keeper.close(deadline_s=STORAGE_CLOSE_S)
        self.judge.close()
        if self._lock is not None:
            self._lock.release()
        log.info("stopped")

    async def _keep_storing(self) -> None:
        """Write buffered runs as soon as storage takes writes again, backing off while it won't."""
        delay = STORAGE_RETRY_S
        while True:
            await asyncio.sleep(delay)
            stored = await self.keeper.retry()
            self.exporter.set_buffered_runs(self.keeper.pending)
            delay = STORAGE_RETRY_S if stored else min(delay * 2, STORAGE_RETRY_MAX_S)

    async def _keep_intake(self) -> None:
        """Write the queued failure reports in batches; refresh the pending gauge now and then."""
        loop = asyncio.get_running_loop()
        recount = Recount(PENDING_AFTER_CHANGE_S, PENDING_REFRESH_S)
        while True:
            await asyncio.sleep(INTAKE_FLUSH_S)
            if await self.intake.flush() is not None:
                recount.stored()
            started = loop.time()
            if recount.due(started):
                pending = await self.keeper.call(self.intake.store.pending_by_signal)
                if pending is not None:
                    self.exporter.set_candidates_pending(pending)
                recount.counted(started, ok=pending is not None)

    async def _flush_intake(self) -> None:
        """At shutdown: write what waits, or say how many reports are lost."""
        if self.intake.queued and await self.intake.flush() is None and self.intake.queued:
            log.warning("failure reports not stored at shutdown", reports=self.intake.queued)

    async def _keep_in_touch(self) -> None:
        """A replica's background: its heartbeat, the runs the other replicas stored, and
        the ticks of replicas that died in the middle of a run."""
        assert self.replicas is not None
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if await self.replicas.beat():
                await self.show_others_runs()
                await self.rerun_orphans()

    async def rerun_orphans(self) -> None:
        """Run again, now, the ticks a dead replica claimed and never stored a run for, so a
        job waits no longer than its interval and a heartbeat timeout after a SIGKILL."""
        assert self.replicas is not None
        now = datetime.now(UTC)
        longest = max(
            (interval_seconds(s, now) for s in self.loaded.config.suites.values()), default=0
        )
        since = now - timedelta(seconds=longest + ORPHAN_SLACK_S)
        until = now - timedelta(seconds=DEAD_AFTER_S)
        orphans = await self.keeper.call(self.store.orphan_claims, self.replicas.live, since, until)
        for job, tick, dead in orphans or ():
            suite, _, target = job.partition("/")
            key = JobKey(suite, target)
            if suite not in self.loaded.config.suites or key.id in self._running:
                continue
            claim = Claim(job, tick, uuid.uuid4().hex)
            adopt = self.store.adopt_claim
            taken = await self.keeper.call(
                adopt, job, tick, dead, self.replicas.replica_id, claim.run_id
            )
            if taken:
                log.warning(
                    "re-running a tick of a replica that died in the middle",
                    suite=suite,
                    target=target,
                    tick=tick.isoformat(),
                    replica=dead,
                )
                task = asyncio.get_running_loop().create_task(self._run_claimed(key, claim))
                self._running[key.id] = task

    async def _run_claimed(self, key: JobKey, claim: Claim) -> None:
        try:
            await self.run_now(key, claim=claim)
        except Exception:  # nothing a run does may take the daemon down
            log.exception("run failed unexpectedly", suite=key.suite, target=key.target)
        finally:
            self._running.pop(key.id, None)

    async def show_others_runs(self) -> None:
        """Export the newest run of every pair, whichever replica ran it: gauges only, since
        counters stay each replica's own (rules sum them)."""
        pairs = [(s, t) for s, cfg in self.loaded.config.suites.items() for t in cfg.targets]
        latest = await self.keeper.call(self.store.latest_runs, pairs)
        for pair, runs in (latest or {}).items():
            for run_id, started_at in reversed(runs):  # the answered run first, then the newest
                shown = self._shown.get(pair)
                if shown is not None and started_at <= shown:
                    continue
                report = await self.keeper.call(self.store.get_report, run_id)
                if report is not None:
                    self.exporter.observe_run(report, counted=False)
                    self._shown[pair] = started_at

    def request_stop(self, reason: str = "signal") -> None:
        if self._stop.is_set():
            return
        log.info("stopping", reason=reason)
        self._stop.set()

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, self.request_stop, "SIGTERM")
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGHUP, self._on_sighup)

    def _on_sigint(self) -> None:
        if self._stop.is_set():
            log.warning("second SIGINT: exiting now")
            os._exit(130)
        self.request_stop("SIGINT")

    def _on_sighup(self) -> None:
        # Held until done: the event loop keeps only a weak reference to a task.
        reloading = asyncio.get_running_loop().create_task(self.reload())
        self._sighups.add(reloading)
        reloading.add_done_callback(self._sighups.discard)

    async def _start_server(self) -> None:
        from ragcanary.serve.api import create_app

        host, _, port = self.loaded.config.listen.rpartition(":")
        config = uvicorn.Config(
            create_app(self),
            host=host.strip("[]") or "127.0.0.1",
            port=int(port),
            log_config=None,
            access_log=False,
            lifespan="off",
            http=guarded_protocol(),
            backlog=BACKLOG,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self.server = _ApiServer(config)
        self._server_task: asyncio.Task[None] | None = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self._server_task.done():
                self._server_task.result()  # re-raises why the server could not start
                raise RuntimeError(f"HTTP server on {self.loaded.config.listen} did not start")
            await asyncio.sleep(0.02)

    # -- config reload ------------------------------------------------------------------

    async def reload(self) -> ReloadResult:
        """Load the config again and apply only what changed; all of it, or nothing.

        Everything is validated and built (triggers included) before anything running is
        touched; a failure while applying rolls back. Jobs whose schedule is unchanged keep
        their next run time.
        """
        async with self._reloading:
            try:
                loaded = await asyncio.to_thread(load_config, self.config_file, self.environ)
                changes = compare(self.loaded, loaded)
                triggers = self._triggers(loaded)
            except ConfigError as exc:
                return self._rejected(400, [str(p) for p in exc.problems])
            except Exception as exc:  # a reload must never take the daemon down
                log.exception("config reload failed")
                return self._rejected(500, [f"the config could not be loaded ({exc!r})"])
            jobs = self._jobs_snapshot()
            try:
                self._apply(loaded, changes, triggers)
            except Exception as exc:
                log.exception("applying the config failed; rolled back")
                self._restore_jobs(jobs)
                self._export_config(self.loaded)
                return self._rejected(500, [f"applying the config failed ({exc!r}); rolled back"])
            self.exporter.set_reload_result(True)
            warnings = tuple(
                f"{name} changed in the config; it takes effect after a restart"
                for name in changes.restart_needed
            )
            for warning in warnings:
                log.warning(warning)
            log.info("config reloaded", **changes.as_dict()["jobs"])
            return ReloadResult(True, 200, changes=changes, warnings=warnings)

    def _export_config(self, loaded: LoadedConfig) -> None:
        """Lay out the exporter's series for ``loaded``: pairs, settings, hash, the UI's URL."""
        pairs, ui_url = suite_pairs(loaded), ui_base_url(loaded.config)
        self.exporter.load(pairs, config_hash=config_hash(loaded), ui_url=ui_url)

    def _rejected(self, status: int, problems: list[str]) -> ReloadResult:
        self.exporter.set_reload_result(False)
        log.error("config reload rejected; the previous config keeps running", problems=problems)
        return ReloadResult(False, status, problems=tuple(problems))

    @staticmethod
    def _triggers(loaded: LoadedConfig) -> dict[str, BaseTrigger]:
        """The trigger of every job of ``loaded``, built before the scheduler is touched."""
        return {
            job_id(name, target): trigger_for(suite)
            for name, suite in loaded.config.suites.items()
            for target in suite.targets
        }

    def _apply(
        self, loaded: LoadedConfig, changes: Changes, triggers: Mapping[str, BaseTrigger]
    ) -> None:
        """Switch to ``loaded``; synchronous, so no run starts halfway through."""
        for removed in changes.jobs.removed:
            self.scheduler.remove_job(removed)
            suite, _, target = removed.partition("/")
            self.stale.forget((suite, target))
        now = datetime.now(UTC)
        for key in (*changes.jobs.added, *sorted(changes.rescheduled)):
            suite, _, target = key.partition("/")
            self._add_job(JobKey(suite, target), loaded.config.suites[suite], triggers[key], now)
        self._export_config(loaded)
        # Nothing below can fail: the new config is in.
        self.intake.configure(intake_settings(loaded))
        if self.replicas is not None:
            self.replicas.config_hash = config_hash(loaded)  # what the heartbeat tells the others
        self._gates = self._gates_to_keep(loaded)
        self.loaded = loaded
        self.redactor.update(loaded.secrets)
        self._retire_clients((*changes.targets.changed, *changes.targets.removed))

    def _jobs_snapshot(self) -> list[tuple[str, BaseTrigger, datetime | None]]:
        return [
            (job.id, job.trigger, job.next_run_time)
            for job in self.scheduler.get_jobs()
            if job.id != "prune"
        ]

    def _restore_jobs(self, jobs: list[tuple[str, BaseTrigger, datetime | None]]) -> None:
        """Put the schedule back as ``_jobs_snapshot`` saw it."""
        for job in self.scheduler.get_jobs():
            if job.id != "prune":
                job.remove()
        for key, trigger, next_run in jobs:
            suite, _, target = key.partition("/")
            self._schedule_job(JobKey(suite, target), trigger, next_run)

    def _gates_to_keep(self, loaded: LoadedConfig) -> dict[str, TargetGate]:
        """The gates of targets whose limits the new config leaves as they were.

        Runs still in flight hold the old gate: a fresh one would let the new config's runs
        start beside them and exceed the target's concurrency and rate limit together.
        """
        old, new = self.loaded.config.targets, loaded.config.targets
        return {
            name: gate
            for name, gate in self._gates.items()
            if name in new
            and (new[name].concurrency, new[name].rate_limit)
            == (old[name].concurrency, old[name].rate_limit)
        }

    def _retire_clients(self, targets: tuple[str, ...]) -> None:
        """New runs of ``targets`` get new clients; the old ones close when idle.

        Closing a client under a run in flight would fail its remaining queries and turn a
        mere reload into an "unavailable" run.
        """
        clients = [self._clients.pop(name) for name in targets if name in self._clients]
        if not clients:
            return
        runs = [t for t in self._running.values() if not t.done()]
        closing = asyncio.get_running_loop().create_task(self._close_clients(clients, runs))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close_clients(
        clients: list[httpx.AsyncClient], runs: list[asyncio.Task[None]]
    ) -> None:
        if runs:
            await asyncio.wait(runs)
        for client in clients:
            await client.aclose()

    # -- scheduling -----------------------------------------------------------------------

    def _schedule_all(self) -> None:
        """At start: the pruning job and one job per (suite, target), each started jittered."""
        self.scheduler.remove_all_jobs()
        now = datetime.now(UTC)
        self.scheduler.add_job(
            self.prune,
            IntervalTrigger(seconds=PRUNE_EVERY_S, timezone=UTC),
            id="prune",
            max_instances=1,
            coalesce=True,
            next_run_time=now + timedelta(seconds=60),
        )
        for suite_name, suite in self.loaded.config.suites.items():
            for target in suite.targets:
                self._add_job(JobKey(suite_name, target), suite, trigger_for(suite), now)

    def _add_job(
        self, key: JobKey, suite: SuiteConfig, trigger: BaseTrigger, now: datetime
    ) -> None:
        """Schedule ``key`` afresh: its first run a random moment into its first interval.

        Replicas instead run every interval job on its grid, the same on all of them.
        """
        if self.replicas is not None:
            if suite.every is not None:
                trigger = grid_trigger(key.id, suite.every)
            self._schedule_job(key, trigger, trigger.get_next_fire_time(None, now))
            return
        # Each job's phase is a golden-ratio step from the last: any number of jobs lie evenly
        # over the interval, where independent random phases leave clumps and gaps.
        self._phase = (self._phase + GOLDEN_STEP) % 1.0
        jitter = self._phase * min(suite.every or 60.0, MAX_START_JITTER_S)
        self._schedule_job(key, trigger, now + timedelta(seconds=jitter))

    def _schedule_job(self, key: JobKey, trigger: BaseTrigger, next_run: datetime | None) -> None:
        self.scheduler.add_job(
            self._run_job,
            trigger,
            args=[key],
            id=key.id,
            name=key.id,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=next_run,
            replace_existing=True,
        )

    def _on_overlap(self, event: JobExecutionEvent) -> None:
        suite, _, target = event.job_id.partition("/")
        self.exporter.count_overlap(suite, target)
        log.warning("previous run still going; this run is skipped", suite=suite, target=target)

    def next_runs(self) -> list[dict[str, Any]]:
        """The schedule as the API shows it."""
        jobs = []
        for job in self.scheduler.get_jobs():
            if job.id == "prune":
                continue
            suite, _, target = job.id.partition("/")
            next_run = job.next_run_time
            jobs.append(
                {
                    "suite": suite,
                    "target": target,
                    "trigger": str(job.trigger),
                    "next_run_at": next_run.isoformat() if next_run else None,
                    "running": job.id in self._running and not self._running[job.id].done(),
                }
            )
        return jobs

    # -- one run -------------------------------------------------------------------------

    async def _run_job(self, key: JobKey) -> None:
        if self._stopping or key.id in self._running:
            return  # stopping, or re-running a dead replica's tick of this job right now
        task = asyncio.current_task()
        assert task is not None
        self._running[key.id] = task
        try:
            claim = None
            if self.replicas is not None:
                claim = await self._claim(key)
                if claim is None:
                    return  # another replica runs this tick, or storage is out of reach
            await self.run_now(key, claim=claim)
        except asyncio.CancelledError:
            # Only shutdown cancels a run, and it is logged here; handing the cancellation on
            # would make APScheduler log it once more, as a job failure with a traceback.
            log.warning("run cancelled", suite=key.suite, target=key.target)
        except Exception:  # nothing a run does may take the daemon down
            log.exception("run failed unexpectedly", suite=key.suite, target=key.target)
        finally:
            self._running.pop(key.id, None)

    async def _claim(self, key: JobKey) -> Claim | None:
        """The current tick of ``key`` and the run id this replica runs it as, or None when
        another replica took it (this one waits its turn first; ``ragcanary.serve.replicas``).
        """
        assert self.replicas is not None
        job = self.scheduler.get_job(key.id)
        suite = self.loaded.config.suites.get(key.suite)
        if job is None or suite is None:
            return None
        tick = tick_of(job.trigger, datetime.now(UTC))
        jobs = [job_id(s, t) for s, cfg in self.loaded.config.suites.items() for t in cfg.targets]
        turn = self.replicas.turn(key.id, jobs)
        if turn:
            every = suite.every or interval_seconds(suite, tick)
            await asyncio.sleep(turn * takeover_s(every, len(self.replicas.live)))
            if self._stopping:
                return None  # a stopping replica leaves the tick to the others
        claim = Claim(key.id, tick, uuid.uuid4().hex)
        if await self.replicas.claim(key.id, tick, claim.run_id):
            return claim
        if self.keeper.down and turn == 0:
            # Storage is out of reach: the first in the job's order runs the tick anyway and
            # claims it when its run is stored, so a database outage does not stop the
            # schedule; a run whose tick another replica claimed meanwhile is not stored.
            return replace(claim, claimed=False)
        return None

    async def run_now(self, key: JobKey, *, claim: Claim | None = None) -> dict[str, Any]:
        """One cycle of ``key``: run, judge against its baseline, export, store, log.

        A replica's run carries its ``claim``: its run id, and the tick in the report.
        """
        loaded = self.loaded
        if key.suite not in loaded.config.suites:
            raise KeyError(key.suite)
        suite_cfg = loaded.config.suites[key.suite]
        pair = (key.suite, key.target)
        baseline_report = await self.keeper.baseline(pair, suite_cfg.baseline)
        baseline = await self.judge.baseline(pair, baseline_report, loaded.suites[key.suite])
        run = await probe_cycle(
            loaded,
            key.suite,
            key.target,
            self._client(key.target),
            gate=self._gate(key.target),
            run_id=claim.run_id if claim is not None else None,
        )
        evaluation, report = await self.judge.judge(loaded, key.suite, key.target, run, baseline)
        if claim is not None and self.replicas is not None:
            report["claim"] = {
                "job": claim.job,
                "tick": claim.tick.isoformat(),
                "replica": self.replicas.replica_id,
                "claimed": claim.claimed,
            }
        if report["outcome"] != "unavailable":
            report["stale_labels"] = await self.stale.find(
                self.loaded, pair, evaluation.run, baseline
            )
        self.exporter.observe_run(report)
        self._shown[pair] = max(evaluation.run.started_at, self._shown.get(pair, EPOCH))
        saved = await self.keeper.save(report)
        self.exporter.set_buffered_runs(self.keeper.pending)
        if saved and suite_cfg.baseline == "pinned":
            await self.keeper.pin_first_healthy(pair, report)
        log_run(report)
        return report

    async def _look_up(self, pair: tuple[str, str], ids: list[str]) -> set[str] | None:
        """Which of ``ids`` the index of ``pair``'s target no longer holds (None: it cannot
        tell), asked on the target's client and within its concurrency."""
        name = pair[1]
        config = self.loaded.config.targets[name]
        target = make_target(name, config, self._client(name), Redactor(self.loaded.secrets))
        try:
            async with self._gate(name).slots:
                return await target.missing(ids)
        finally:
            await target.aclose()

    async def search(
        self, target: str, queries: list[str], depth: int, on_answer: OnAnswer
    ) -> None:
        """Ask ``target`` for each of ``queries`` now, on the runs' client and within their
        limits (``serve.live_search``): the candidates page's live results."""
        client, gate = self._client(target), self._gate(target)
        await search_now(self.loaded, target, client, gate, queries, depth, on_answer)

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` (admin API); the next run compares with it."""
        await self.keeper.set_baseline(suite, target, run_id)

    async def prune(self) -> None:
        """Delete runs past the configured retention."""
        config = self.loaded.config
        await self.keeper.prune(
            datetime.now(UTC),
            timedelta(seconds=config.retention),
            timedelta(seconds=config.retention_failed),
        )

    def _gate(self, target: str) -> TargetGate:
        if target not in self._gates:
            config = self.loaded.config.targets[target]
            self._gates[target] = TargetGate(config.concurrency, config.rate_limit)
        return self._gates[target]

    def _client(self, target: str) -> httpx.AsyncClient:
        if target not in self._clients:
            self._clients[target] = self.client_factory(self.loaded.config.targets[target])
        return self._clients[target]


def log_run(report: Mapping[str, Any]) -> None:
    """One summary line per run, and a warning with the reasons when queries failed."""
    metrics = report["metrics"]
    key_metrics = {
        m: v for m, v in metrics.items() if m.startswith(("hit_rate@", "ndcg@")) or m == "mrr"
    }
    baseline = report.get("baseline") or {}
    regression = report["outcome"] == "regression"
    (log.warning if regression else log.info)(
        "run",
        suite=report["suite"],
        target=report["target"],
        outcome=report["outcome"],
        coverage=report["coverage"],
        duration_s=report["duration_s"],
        run_id=report["run_id"],
        rank_overlap=baseline.get("rank_overlap"),
        score_drift=baseline.get("score_drift"),
        reasons=[f["message"] for f in report.get("failures") or ()] if regression else None,
        **key_metrics,
    )
    kinds = failure_kinds(report)
    if kinds:
        log.warning(
            "queries failed",
            suite=report["suite"],
            target=report["target"],
            reasons={outcome: kind["count"] for outcome, kind in kinds.items()},
            first_errors={outcome: kind["first"] for outcome, kind in kinds.items()},
        )
