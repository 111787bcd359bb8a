"""Grading in the background: one worker asks the judges, never on a run's critical path.

``Grading.submit`` is called once a run is stored and returns at once: the run's unlabelled
entered ids wait in a bounded queue (a full queue drops the run's grading, counted as
``queue_full``; the next run asks for the same ids again while they stay in the top-k). The
worker then, per run: claims the ids in storage (each (id, query, judge fingerprint) once,
within the judge's ``max_per_run`` and ``max_per_day``), fetches their texts from the run's
target, asks the judge per canary query, and stores each grade as a proposed judgment.

What a judge does wrong never fails a run and never stops the worker:

- the judge unreachable, slow or overloaded after its retries (timeout, connect_error,
  http_5xx, rate_limited): the documents are released, so that a later run asks again;
- any other failure of the request (http_4xx, bad_response): the documents are stored as
  ``refused`` with the reason, never asked again under the same fingerprint;
- an answer without a grade for a document (unparseable): that one is ``refused``;
- no text for a document (no_text): ``refused`` when the target answered without it (a 404);
  released, for a later run, when the target could not fetch texts at all.

Each document not graded counts once in ``ragcanary_judge_errors_total{judge,reason}``, and
a run's failures are logged in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import structlog

from ragcanary.config.judges import JudgeConfig
from ragcanary.measure.run_report import RunReport
from ragcanary.probe.graders import make_grader, make_judge_client
from ragcanary.probe.graders.grades import Document, Grader
from ragcanary.probe.retries import QueryFailed
from ragcanary.redact import Redactor
from ragcanary.serve.grading.wanted import entered_unlabelled
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.store.judgments import Judgment, JudgmentStore, Wanted
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

log = structlog.get_logger("ragcanary")

QUEUE_RUNS = 100  # runs waiting for the worker at most
PENDING_REFRESH_S = 15.0  # the pending gauge is read from the store at least this often
NO_TEXT = "the target has no text for this id (a 404, or an empty text)"
NO_FETCH = (
    "the target gave no document texts (the fetch failed, or it cannot: presets other than "
    "chroma, a generic target without fetch:)"
)

# A target's texts by id (None: it cannot fetch texts), asked within the target's limits.
Texts = Callable[[str, list[str]], Awaitable[dict[str, str] | None]]


@dataclass(frozen=True)
class Job:
    """One run's grading: its judge as configured when the run ended, and what to grade."""

    judge: str
    config: JudgeConfig
    target: str
    run_id: str
    wanted: tuple[Wanted, ...]


class Grading:
    """The background worker of the daemon's judges."""

    def __init__(
        self,
        keeper: RunKeeper,
        exporter: Exporter,
        texts: Texts,
        *,
        client_factory: Callable[[JudgeConfig], httpx.AsyncClient] = make_judge_client,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        queue_runs: int = QUEUE_RUNS,
    ) -> None:
        self.keeper = keeper
        self.judgments = JudgmentStore(keeper.store)
        self._exporter = exporter
        self._texts = texts
        self._client_factory = client_factory
        self._clock = clock
        self._queue: asyncio.Queue[Job] = asyncio.Queue(queue_runs)
        self._graders: dict[str, tuple[JudgeConfig, httpx.AsyncClient, Grader]] = {}
        self._task: asyncio.Task[None] | None = None
        self.redact = Redactor(())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._work())

    async def stop(self) -> None:
        """Stop the worker (a grading in flight is dropped; its queued rows are claimed again
        an hour later) and close the judges' clients."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5)
        for _, client, _ in self._graders.values():
            await client.aclose()
        self._graders.clear()

    def submit(self, loaded: LoadedConfig, report: RunReport) -> int:
        """Queue ``report``'s unlabelled entered ids for its suite's judge; how many. Never
        blocks and never raises."""
        suite_config = loaded.config.suites.get(report.suite)
        suite = loaded.suites.get(report.suite)
        if suite_config is None or suite is None or suite_config.judge is None:
            return 0
        name = suite_config.judge
        config = loaded.config.judges.get(name)
        wanted = entered_unlabelled(report, suite)
        if config is None or not wanted:
            return 0
        self.redact = Redactor(loaded.secrets)
        job = Job(name, config, report.target, report.run_id, tuple(wanted))
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self._exporter.count_judge_error(name, "queue_full", len(wanted))
            log.warning(
                "judge queue full: this run's entered ids are not graded",
                judge=name,
                suite=report.suite,
                target=report.target,
                run_id=report.run_id,
                ids=len(wanted),
            )
        return len(wanted)

    async def idle(self) -> None:
        """Wait until every submitted run is graded (tests, shutdown in order)."""
        await self._queue.join()

    async def refresh_pending(self) -> None:
        """Export how many proposed judgments wait (``ragcanary_judgments_pending``)."""
        pending = await self.keeper.call(self.judgments.pending)
        if pending is not None:
            self._exporter.set_judgments_pending(pending)

    async def _work(self) -> None:
        while True:
            try:
                job = await asyncio.wait_for(self._queue.get(), PENDING_REFRESH_S)
            except TimeoutError:  # decisions made elsewhere: a CLI, another replica
                await self.refresh_pending()
                continue
            try:
                await self.grade(job)
            except Exception:  # nothing a judge does may stop the worker
                log.exception("grading failed unexpectedly", judge=job.judge, run_id=job.run_id)
            finally:
                self._queue.task_done()

    async def grade(self, job: Job) -> Counter[str]:
        """Grade one run's documents; the documents not graded, by reason."""
        grader = await self._grader(job.judge, job.config)
        claimed: list[Judgment] | None = await self.keeper.call(
            self.judgments.claim,
            list(job.wanted),
            job.judge,
            grader.fingerprint,
            self._clock(),
            job.config.max_per_run,
            job.config.max_per_day,
        )
        failed: Counter[str] = Counter()
        first: dict[str, str] = {}
        if claimed is None:
            failed["storage"] = len(job.wanted)
        elif claimed:
            await self._grade_claimed(job, grader, claimed, failed, first)
            await self.refresh_pending()
        for reason, count in failed.items():
            self._exporter.count_judge_error(job.judge, reason, count)
        if failed:
            log.warning(
                "judge did not grade every entered id",
                judge=job.judge,
                target=job.target,
                run_id=job.run_id,
                failed=dict(failed),
                first=first,
            )
        return failed

    async def _grade_claimed(
        self,
        job: Job,
        grader: Grader,
        claimed: list[Judgment],
        failed: Counter[str],
        first: dict[str, str],
    ) -> None:
        def refuse(judgment: Judgment, reason: str, note: str) -> Awaitable[None]:
            failed[reason] += 1
            first.setdefault(reason, note)
            return self._store(self.judgments.record, judgment.id, None, None, note)

        texts = await self._texts(job.target, sorted({j.doc_id for j in claimed}))
        if texts is None:  # the target cannot fetch texts (or the fetch failed): ask again later
            failed["no_text"] += len(claimed)
            first.setdefault("no_text", NO_FETCH)
            await self._store(self.judgments.release, [j.id for j in claimed])
            return
        by_query: dict[str, list[tuple[Judgment, Document]]] = {}
        for judgment in claimed:
            text = texts.get(judgment.doc_id)
            if text is None:
                await refuse(judgment, "no_text", NO_TEXT)
                continue
            by_query.setdefault(judgment.query, []).append(
                (judgment, Document(judgment.doc_id, text))
            )
        for query, pairs in by_query.items():
            try:
                graded = await grader.grade(query, [document for _, document in pairs])
            except QueryFailed as failure:
                reason = self.redact(failure.counted)
                if failure.transient:  # asked again by a later run
                    failed[failure.outcome] += len(pairs)
                    first.setdefault(failure.outcome, reason)
                    await self._store(self.judgments.release, [j.id for j, _ in pairs])
                    continue
                for judgment, _ in pairs:
                    await refuse(judgment, failure.outcome, reason)
                continue
            for (judgment, _), grade in zip(pairs, graded, strict=True):
                if grade.grade is None:
                    await refuse(judgment, "unparseable", grade.refusal or "no grade")
                else:
                    await self._store(
                        self.judgments.record, judgment.id, grade.grade, grade.score, None
                    )

    async def _store(self, fn: Callable[..., None], *args: object) -> None:
        await self.keeper.call(fn, *args)

    async def _grader(self, name: str, config: JudgeConfig) -> Grader:
        """Judge ``name``'s grader, made again (with a new client) when its config changed."""
        kept = self._graders.get(name)
        if kept is not None and kept[0] == config:
            return kept[2]
        if kept is not None:
            with contextlib.suppress(Exception):
                await kept[1].aclose()
        client = self._client_factory(config)
        grader = make_grader(name, config, client, self.redact)
        self._graders[name] = (config, client, grader)
        return grader
