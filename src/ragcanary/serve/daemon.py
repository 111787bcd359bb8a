"""The daemon's life as one object: start, schedule canary runs, reload, stop cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import structlog
import uvicorn
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from ragcanary.errors import ConfigError
from ragcanary.logs import RedactSecrets
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import RunClaim, RunReport
from ragcanary.probe.cycle import probe_cycle
from ragcanary.probe.endpoints import ask_endpoints
from ragcanary.probe.evidence import index_evidence
from ragcanary.probe.presets import PresetTarget, make_target
from ragcanary.probe.runner import TargetGate
from ragcanary.probe.target import make_client
from ragcanary.redact import Redactor
from ragcanary.serve.background import (
    SLO_BUDGET_S,
    STORAGE_SIZE_S,
    flush_intake,
    keep_budgets,
    keep_intake,
    keep_measuring,
    keep_storing,
    measure_storage,
)
from ragcanary.serve.daemon_service import DaemonService
from ragcanary.serve.grading.worker import Grading
from ragcanary.serve.http.server import api_server
from ragcanary.serve.intake.queue import Intake, intake_settings
from ragcanary.serve.metrics.config_export import config_hash, suite_pairs, ui_base_url
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.serve.replicas.claims import Claim, adopt_tick, claim_tick, orphan_window
from ragcanary.serve.replicas.heartbeats import HEARTBEAT_S, Replicas
from ragcanary.serve.replicas.shown_runs import ShownRuns
from ragcanary.serve.schedule.change_verdicts import ChangeVerdicts
from ragcanary.serve.schedule.connections import Connections
from ragcanary.serve.schedule.jobs import JobKey, Jobs, interval_seconds, job_triggers
from ragcanary.serve.schedule.judging import Judge
from ragcanary.serve.schedule.live_search import search_now
from ragcanary.serve.schedule.reloading import Changes, ReloadResult, compare
from ragcanary.serve.schedule.runlog import log_run
from ragcanary.serve.schedule.windows import WINDOWS_S, Windows
from ragcanary.serve.service import OnAnswer
from ragcanary.serve.stale.index_checks import IndexChecks
from ragcanary.serve.stale.labels import StaleLabels
from ragcanary.store.candidates import CandidateStore
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.lock import Lock, acquire
from ragcanary.store.spool import Spool, spool_path
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig, load_config
from ragcanary.threads import run_in

log = structlog.get_logger("ragcanary")

STORAGE_CLOSE_S = 5.0  # at shutdown: storing what waits, then spooling the rest

T = TypeVar("T")


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
        storage_size_s: float = STORAGE_SIZE_S,
    ) -> None:
        self.config_file = config_file
        self.environ = environ
        self.loaded = loaded
        self.exporter = exporter or Exporter()
        self.redactor = redactor or RedactSecrets()
        self.grace_s = grace_s
        self.connections = Connections(client_factory)
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
        self.shown = ShownRuns(self.keeper, self.exporter)
        self.windows = Windows(self.keeper)  # declared changes' maintenance windows
        self._windows_task: asyncio.Task[None] | None = None
        # What the API and the pages see of this daemon: reads, not its store or exporter.
        self.service = DaemonService(
            loaded=lambda: self.loaded,
            keeper=self.keeper,
            exporter=self.exporter,
            intake=self.intake,
            replicas=self.replicas,
            next_runs=self.next_runs,
            reload=self.reload,
            search=self.search,
            windows_changed=self.show_windows,
            grading=lambda: self.grading,
        )
        self.stale = StaleLabels(self.keeper, self._look_up, index_checks)
        # Judges grade unlabelled ids that entered a top-k, after the run, in the background.
        self.grading = Grading(self.keeper, self.exporter, self._texts)
        self.judge = judge or Judge()  # a run's evaluation and report, off the event loop
        # The first run of a pair after a change's window is judged against the run before it.
        self.change_verdicts = ChangeVerdicts(self.keeper, self.judge, self._evidence)
        self._storage_task: asyncio.Task[None] | None = None
        self.storage_size_s = storage_size_s  # how often ragcanary_storage_bytes is measured
        self._size_task: asyncio.Task[None] | None = None
        self._budget_task: asyncio.Task[None] | None = None
        self.jobs = Jobs(
            self._run_job, rng=rng or random.Random(), on_grid=self.replicas is not None
        )
        self._running: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        self._reloading = asyncio.Lock()  # one reload at a time, whether by API or SIGHUP
        self._sighups: set[asyncio.Task[ReloadResult]] = set()
        self._stopping = False
        self.server: uvicorn.Server | None = None
        self.redactor.update(loaded.secrets)

    @property
    def store(self) -> Store:
        return self.keeper.store

    def _budget_every(self) -> float:
        """How often the SLOs' budget gauges are read: as often as an SLO suite runs, from
        every second to every SLO_BUDGET_S."""
        now = datetime.now(UTC)
        intervals = [
            interval_seconds(suite, now)
            for suite in self.loaded.config.suites.values()
            if suite.slo is not None
        ]
        return max(1.0, min([SLO_BUDGET_S, *intervals]))

    @property
    def scheduler(self) -> AsyncIOScheduler:
        return self.jobs.scheduler

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
        self._lock = await run_in(None, acquire, self.loaded.config.storage)
        self.keeper.replay_spool()
        await self.keeper.ensure_schema()
        self.exporter.set_buffered_runs(self.keeper.pending)
        self._storage_task = asyncio.get_running_loop().create_task(
            keep_storing(self.keeper, self.exporter)
        )
        self._intake_task = asyncio.get_running_loop().create_task(
            keep_intake(self.intake, self.keeper, self.exporter)
        )
        self._size_task = asyncio.get_running_loop().create_task(
            keep_measuring(self.keeper, self.exporter, self.storage_size_s)
        )
        self._budget_task = asyncio.get_running_loop().create_task(
            keep_budgets(self.keeper, self.exporter, self.service.slo_budgets, self._budget_every)
        )
        if self.replicas is not None:
            await self.replicas.beat()
            self._replica_task = asyncio.get_running_loop().create_task(self._keep_in_touch())
        self._export_config(self.loaded)
        await self.show_windows()
        self._windows_task = asyncio.get_running_loop().create_task(self._keep_windows())
        self.exporter.set_reload_result(True)
        self.grading.start()
        await self.grading.refresh_pending()
        self.scheduler.add_listener(self._on_overlap, EVENT_JOB_MAX_INSTANCES)
        self.jobs.schedule_all(self.loaded, self.prune)
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
        await self.grading.stop()
        await self.connections.aclose()
        background_tasks = (
            self._storage_task,
            self._replica_task,
            self._intake_task,
            self._size_task,
            self._windows_task,
            self._budget_task,
        )
        for background in background_tasks:
            if background is not None:
                background.cancel()
                await asyncio.wait([background], timeout=1)
        await flush_intake(self.intake)
        if self.server is not None:
            self.server.should_exit = True
            if self._server_task is not None:
                await asyncio.wait([self._server_task], timeout=5)
        self.intake.close()  # once no request can be checked any more
        await self.keeper.close(deadline_s=STORAGE_CLOSE_S)
        self.judge.close()
        if self._lock is not None:
            self._lock.release()
        log.info("stopped")

    async def _keep_in_touch(self) -> None:
        """A replica's background: its heartbeat, the runs the other replicas stored, and
        the ticks of replicas that died in the middle of a run."""
        assert self.replicas is not None
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if await self.replicas.beat():
                await self.show_others_runs()
                await self.rerun_orphans()

    async def _keep_windows(self) -> None:
        """Read the open change windows again every few seconds: declared through another
        replica, or closed by their end."""
        while True:
            await asyncio.sleep(WINDOWS_S)
            await self.show_windows()

    async def show_windows(self) -> None:
        """Read the open change windows and export ``ragcanary_maintenance`` from them."""
        await self.windows.refresh()
        self.exporter.set_maintenance(self.windows.held(self.loaded))

    async def rerun_orphans(self) -> None:
        """Run again, now, the ticks a dead replica claimed and never stored a run for, so a
        job waits no longer than its interval and a heartbeat timeout after a SIGKILL."""
        assert self.replicas is not None
        since, until = orphan_window(self.loaded)
        orphans = await self.keeper.call(self.store.orphan_claims, self.replicas.live, since, until)
        for job, tick, dead in orphans or ():
            key = JobKey.of(job)
            if key.suite not in self.loaded.config.suites or key.id in self._running:
                continue
            claim = await adopt_tick(self.replicas, self.keeper, job, tick, dead)
            if claim is not None:
                log.warning(
                    "re-running a tick of a replica that died in the middle",
                    suite=key.suite,
                    target=key.target,
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
        """Export the newest run of every pair, whichever replica ran it (``ShownRuns``)."""
        assert self.replicas is not None
        await self.shown.show_others(self.loaded, self.replicas)

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
        from ragcanary.serve.http.api import create_app

        self.server = api_server(create_app(self.service), self.loaded.config.listen)
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
                loaded = await run_in(None, load_config, self.config_file, self.environ)
                changes = compare(self.loaded, loaded)
                triggers = job_triggers(loaded)
            except ConfigError as exc:
                return self._rejected(400, [str(p) for p in exc.problems])
            except Exception as exc:  # a reload must never take the daemon down
                log.exception("config reload failed")
                return self._rejected(500, [f"the config could not be loaded ({exc!r})"])
            jobs = self.jobs.snapshot()
            try:
                self._apply(loaded, changes, triggers)
            except Exception as exc:
                log.exception("applying the config failed; rolled back")
                self.jobs.restore(jobs)
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
            await self.grading.refresh_pending()  # a label accepted in a suite file, say
            return ReloadResult(True, 200, changes=changes, warnings=warnings)

    def _export_config(self, loaded: LoadedConfig) -> None:
        """Lay out the exporter's series for ``loaded``: pairs, settings, hash, link bases."""
        pairs, ui_url = suite_pairs(loaded), ui_base_url(loaded.config)
        runbook_url = loaded.config.runbook_base_url
        self.exporter.load(
            pairs, config_hash=config_hash(loaded), ui_url=ui_url, runbook_url=runbook_url
        )
        self.exporter.load_judges(loaded.config.judges)

    def _rejected(self, status: int, problems: list[str]) -> ReloadResult:
        self.exporter.set_reload_result(False)
        log.error("config reload rejected; the previous config keeps running", problems=problems)
        return ReloadResult(False, status, problems=tuple(problems))

    def _apply(
        self, loaded: LoadedConfig, changes: Changes, triggers: Mapping[str, BaseTrigger]
    ) -> None:
        """Switch to ``loaded``; synchronous, so no run starts halfway through."""
        for removed in changes.jobs.removed:
            self.jobs.remove(removed)
            gone = JobKey.of(removed)
            self.stale.forget((gone.suite, gone.target))
        now = datetime.now(UTC)
        for job in (*changes.jobs.added, *sorted(changes.rescheduled)):
            key = JobKey.of(job)
            self.jobs.add(key, loaded, triggers[job], now)
        self._export_config(loaded)
        self.exporter.set_maintenance(self.windows.held(loaded))
        # Nothing below can fail: the new config is in.
        self.intake.configure(intake_settings(loaded))
        if self.replicas is not None:
            self.replicas.config_hash = config_hash(loaded)  # what the heartbeat tells the others
        self.connections.keep_gates(self.loaded.config.targets, loaded.config.targets)
        self.loaded = loaded
        self.shown.all_read = False  # pairs it adds may have runs stored before
        self.redactor.update(loaded.secrets)
        runs = [t for t in self._running.values() if not t.done()]
        self.connections.retire((*changes.targets.changed, *changes.targets.removed), runs)

    # -- scheduling -----------------------------------------------------------------------

    def _on_overlap(self, event: JobExecutionEvent) -> None:
        key = JobKey.of(event.job_id)
        self.exporter.count_overlap(key.suite, key.target)
        log.warning(
            "previous run still going; this run is skipped", suite=key.suite, target=key.target
        )

    def next_runs(self) -> list[dict[str, Any]]:
        """The schedule as the API shows it."""
        return self.jobs.next_runs(self._running)

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
        """This replica's claim on the current tick of ``key`` (``replicas.claims.claim_tick``)."""
        assert self.replicas is not None
        trigger = self.jobs.trigger(key)
        return await claim_tick(
            self.replicas, self.keeper, self.loaded, key, trigger, lambda: self._stopping
        )

    async def run_now(self, key: JobKey, *, claim: Claim | None = None) -> RunReport:
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
        # Asked now, whatever the stale labels remember: what left this run's top-k.
        evidence = await self._evidence(pair, run, baseline)
        client, gate = self._client(key.target), self._gate(key.target)
        endpoints = await ask_endpoints(loaded, key.suite, key.target, run, client, gate=gate)
        evaluation, report = await self.judge.judge(
            loaded, key.suite, key.target, run, baseline, evidence, endpoints
        )
        if claim is not None and self.replicas is not None:
            ran = RunClaim(
                claim.job, claim.tick.isoformat(), self.replicas.replica_id, claim.claimed
            )
            report = replace(report, claim=ran)
        held = await self.windows.of_run(key.target, evaluation.run.started_at)
        if held is not None:  # a run inside a change window: stored with the change's id
            report = replace(report, maintenance=held)
        report = await self.change_verdicts.judged(loaded, evaluation.run, report, endpoints)
        if report.outcome != "unavailable":
            found = await self.stale.find(self.loaded, pair, evaluation.run, baseline, evidence)
            report = replace(report, stale_labels=found.labels, index_lookup=found.lookup)
        self.exporter.observe_run(report)
        self.shown.ran(pair, evaluation.run.started_at)
        saved = await self.keeper.save(report)
        self.exporter.set_buffered_runs(self.keeper.pending)
        # A change never pins a baseline: a run inside its window is no first healthy run.
        if saved and suite_cfg.baseline == "pinned" and report.maintenance is None:
            await self.keeper.pin_first_healthy(pair, report)
        if saved:  # the judge's work waits in the background: the run is done
            self.grading.submit(loaded, report)
        log_run(report)
        return report

    async def _evidence(
        self, pair: tuple[str, str], run: RunResult, baseline: RunResult | None
    ) -> IndexEvidence:
        """What the index of ``pair``'s target says now of the ids that left their top-k
        (``probe.evidence``), asked on the target's client and within its concurrency."""
        now = self.stale.index_checks.now
        return await self._ask_index(pair[1], lambda t: index_evidence(t, run, baseline, now))

    async def _look_up(self, pair: tuple[str, str], ids: list[str]) -> set[str] | None:
        """Which of ``ids`` the index of ``pair``'s target no longer holds (None: it cannot
        tell), asked on the target's client and within its concurrency."""
        return await self._ask_index(pair[1], lambda target: target.missing(ids))

    async def _texts(self, name: str, ids: list[str]) -> dict[str, str] | None:
        """The texts of ``ids`` in the index of target ``name`` (None: it cannot fetch them),
        for a judge, asked on the target's client and within its concurrency."""
        if name not in self.loaded.config.targets:
            return None  # removed by a reload since the run
        return await self._ask_index(name, lambda target: target.texts(ids))

    async def _ask_index(self, name: str, ask: Callable[[PresetTarget], Awaitable[T]]) -> T:
        """``ask`` of target ``name``, made for it on the target's client and holding one of
        its concurrency slots; the target is closed after."""
        config = self.loaded.config.targets[name]
        target = make_target(name, config, self._client(name), Redactor(self.loaded.secrets))
        try:
            async with self._gate(name).slots:
                return await ask(target)
        finally:
            await target.aclose()

    async def search(
        self, target: str, queries: list[str], depth: int, on_answer: OnAnswer
    ) -> None:
        """Ask ``target`` for each of ``queries`` now, on the runs' client and within their
        limits (``serve.schedule.live_search``): the candidates page's live results."""
        client, gate = self._client(target), self._gate(target)
        await search_now(self.loaded, target, client, gate, queries, depth, on_answer)

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` (admin API); the next run compares with it."""
        await self.keeper.set_baseline(suite, target, run_id)

    async def prune(self) -> None:
        """Delete runs past the configured retention, then export the store's new size."""
        config = self.loaded.config
        await self.keeper.prune(
            datetime.now(UTC),
            timedelta(seconds=config.retention),
            timedelta(seconds=config.retention_failed),
        )
        await measure_storage(self.keeper, self.exporter)

    def _gate(self, target: str) -> TargetGate:
        return self.connections.gate(target, self.loaded.config.targets[target])

    def _client(self, target: str) -> httpx.AsyncClient:
        return self.connections.client(target, self.loaded.config.targets[target])
