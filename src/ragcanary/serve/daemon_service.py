"""The daemon's parts behind the ``Service`` protocol: what the API and the pages read and ask."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

from ragcanary.errors import UsageError
from ragcanary.measure.run_report import IndexLookup, RunReport, StaleLabelEntry
from ragcanary.reports.oncall import case_history, diff_runs, relevant_ids, run_diff
from ragcanary.reports.pinned_config import flag_baselines
from ragcanary.reports.slo_budget import budget_rows, objectives
from ragcanary.serve.grading import review
from ragcanary.serve.grading.worker import Grading
from ragcanary.serve.intake.queue import Intake
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.serve.replicas.heartbeats import Replicas
from ragcanary.serve.schedule.reloading import ReloadResult
from ragcanary.serve.service import (
    CandidateStatus,
    DiffInputs,
    OnAnswer,
    Pair,
    ReplicaView,
    Row,
    RunMark,
)
from ragcanary.store import overview
from ragcanary.store.candidates import CandidateStore
from ragcanary.store.change_records import Change, ChangeRequest, PairVerdict
from ragcanary.store.changes import ChangeStore
from ragcanary.store.judgments import JudgmentStore
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.run_ids import resolve_run_id
from ragcanary.store.slo_events import SloLedger
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.threads import run_in


class DaemonService:
    """A ``serve.service.Service`` over one daemon's store, keeper, exporter and intake.

    Every read goes to storage as it is asked: nothing is cached here, so what the API and
    the pages say is what storage holds (any replica answers alike). The one exception is
    the SLO ledger, which keeps the events of stored runs (they never change) and reads the
    new ones at each ask.
    """

    def __init__(
        self,
        *,
        loaded: Callable[[], LoadedConfig],
        keeper: RunKeeper,
        exporter: Exporter,
        intake: Intake,
        replicas: Replicas | None,
        next_runs: Callable[[], list[Row]],
        reload: Callable[[], Awaitable[ReloadResult]],
        search: Callable[[str, list[str], int, OnAnswer], Awaitable[None]],
        windows_changed: Callable[[], Awaitable[None]],
        grading: Callable[[], Grading] | None = None,
        ledger: SloLedger | None = None,
    ) -> None:
        self.ledger = ledger if ledger is not None else SloLedger()
        self._loaded = loaded
        self._keeper = keeper
        self._exporter = exporter
        self._intake = intake
        self._replicas = replicas
        self._next_runs = next_runs
        self._reload = reload
        self._search = search
        self._windows_changed = windows_changed
        self._grading = grading

    @property
    def _store(self) -> Store:
        return self._keeper.store

    # -- the daemon ------------------------------------------------------------------------

    @property
    def loaded(self) -> LoadedConfig:
        return self._loaded()

    def exposition(self) -> bytes:
        return self._exporter.exposition()

    async def writable(self, deadline_s: float) -> str | None:
        return await self._keeper.writable(deadline_s)

    @property
    def buffered_runs(self) -> int:
        return self._keeper.pending

    @property
    def replica(self) -> ReplicaView | None:
        if self._replicas is None:
            return None
        return ReplicaView(self._replicas.replica_id, len(self._replicas.live))

    def next_runs(self) -> list[Row]:
        return self._next_runs()

    async def reload(self) -> ReloadResult:
        return await self._reload()

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        await self._keeper.set_baseline(suite, target, run_id)

    async def search(
        self, target: str, queries: list[str], depth: int, on_answer: OnAnswer
    ) -> None:
        await self._search(target, queries, depth, on_answer)

    async def receive_report(
        self, body: bytes, peer: str | None, forwarded_for: Sequence[str]
    ) -> str:
        client = self._intake.client(peer, forwarded_for)
        targets = list(self.loaded.config.targets)
        return (await self._intake.receive(body, targets, client)).query

    # -- stored runs -----------------------------------------------------------------------

    def runs(
        self,
        suite: str | None,
        target: str | None,
        limit: int,
        outcome: str | None = None,
        since: datetime | None = None,
    ) -> list[Row]:
        return self._store.list_runs(suite, target, limit, outcome, since)

    def latest_run(
        self,
        suite: str,
        target: str,
        *,
        outcome: str | None = None,
        exclude_unavailable: bool = True,
    ) -> Row | None:
        return self._store.latest_run(
            suite, target, outcome=outcome, exclude_unavailable=exclude_unavailable
        )

    def resolve_run(self, given: str) -> str:
        return resolve_run_id(self._store, given)

    def report(self, run_id: str) -> RunReport | None:
        return self._store.get_report(run_id)

    def run_heads(self, run_ids: Iterable[str]) -> dict[str, RunReport]:
        return overview.run_heads(self._store, run_ids)

    def run_metrics(self, run_ids: Iterable[str]) -> dict[str, dict[str, float | None]]:
        return overview.run_metrics(self._store, run_ids)

    def run_at(self, suite: str, target: str, at: datetime) -> str | None:
        return overview.run_at(self._store, suite, target, at)

    def neighbours(
        self, suite: str, target: str, started_at: datetime, run_id: str
    ) -> tuple[str | None, str | None]:
        return overview.neighbours(self._store, suite, target, started_at, run_id)

    def recent_runs(self, suite: str, target: str, limit: int) -> list[Row]:
        return overview.recent_runs(self._store, suite, target, limit)

    def day_runs(self, pairs: Iterable[Pair], since: datetime) -> dict[Pair, list[RunMark]]:
        return overview.day_runs(self._store, pairs, since)

    def newest_runs(self, pairs: Iterable[Pair], *, answered: bool = False) -> dict[Pair, RunMark]:
        return overview.newest_runs(self._store, pairs, answered=answered)

    def slo_budgets(self, suite: str | None, target: str | None) -> list[Row]:
        slos = objectives(self.loaded.config.suites, suite, target)
        budgets = self.ledger.budgets(self._store, slos, datetime.now(UTC))
        return budget_rows(budgets, slos)

    def baselines(self) -> list[Row]:
        rows = self._store.baselines()
        heads = overview.run_heads(self._store, [str(r["run_id"]) for r in rows])
        return flag_baselines(self.loaded, rows, heads)

    def baseline(self, suite: str, target: str) -> str | None:
        return self._store.get_baseline(suite, target)

    # -- diffs, histories, stale labels ------------------------------------------------------

    def diff(self, suite: str, target: str, from_run: str | None, to_run: str | None) -> Row:
        in_force = self.loaded  # one config for the whole answer, whatever a reload does
        config = in_force.config.suites.get(suite)
        loaded = in_force.suites.get(suite)
        depth = config.depth if config is not None else None
        drift = config.thresholds.score_drift if config is not None else None
        relevant = relevant_ids(loaded.cases) if loaded is not None else None
        return run_diff(self._store, suite, target, from_run, to_run, depth, relevant, drift)

    def diff_inputs(
        self, suite: str, target: str, from_run: str | None, to_run: str | None
    ) -> DiffInputs:
        loaded = self.loaded.suites.get(suite)
        relevant = relevant_ids(loaded.cases) if loaded is not None else {}
        before, after, outage = diff_runs(self._store, suite, target, from_run, to_run)
        return DiffInputs(before, after, outage, relevant)

    def case_history(
        self, suite: str, case_id: str, target: str | None, since: timedelta
    ) -> list[Row]:
        loaded = self.loaded.suites.get(suite)
        case = loaded.by_id.get(case_id) if loaded is not None else None
        if case is None:  # removed by a reload since the caller looked
            raise UsageError(f"no case {case_id!r} in suite {suite!r}")
        return case_history(self._store, suite, case, target, since)

    def case_rows(
        self, suite: str, case_id: str, target: str | None, since: datetime | None
    ) -> list[Row]:
        return self._store.case_history(suite, case_id, target=target, since=since)

    def case_entries(self, run_ids: Iterable[str], case_id: str) -> dict[str, Row]:
        return overview.case_entries(self._store, run_ids, case_id)

    def stale_findings(
        self, run_ids: Iterable[str]
    ) -> dict[str, tuple[tuple[StaleLabelEntry, ...] | None, IndexLookup | None]]:
        return overview.stale_findings(self._store, run_ids)

    # -- candidates ------------------------------------------------------------------------

    def candidates(
        self, status: CandidateStatus | None, signal: str | None, since: datetime | None
    ) -> list[Row]:
        return CandidateStore(self._store).list(status, signal, since)

    def pending_page(self, signal: str | None, limit: int, offset: int) -> tuple[list[Row], int]:
        return CandidateStore(self._store).pending_page(signal, limit, offset)

    def candidate(self, candidate_id: int) -> Row | None:
        return CandidateStore(self._store).get(candidate_id)

    # -- changes ---------------------------------------------------------------------------

    def record_change(self, request: ChangeRequest) -> Change:
        return ChangeStore(self._store).start(request, datetime.now(UTC))

    def finish_change(self, change_id: str) -> Change | None:
        return ChangeStore(self._store).finish(change_id, datetime.now(UTC))

    def changes(self, limit: int) -> list[Change]:
        return ChangeStore(self._store).recent(limit)

    def change(self, change_id: str) -> Change | None:
        return ChangeStore(self._store).get(change_id)

    def change_verdicts(self, changes: Sequence[Change]) -> dict[str, list[PairVerdict]]:
        suites = self.loaded.config.suites
        pairs = [(suite, target) for suite, cfg in suites.items() for target in cfg.targets]
        store, now = ChangeStore(self._store), datetime.now(UTC)
        return {c.change_id: store.verdicts(c, pairs, now) for c in changes}

    async def windows_changed(self) -> None:
        await self._windows_changed()

    # -- judgments ---------------------------------------------------------------------------

    def judgments(
        self,
        state: str | None,
        suite: str | None = None,
        case_id: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
    ) -> list[Row]:
        found = JudgmentStore(self._store).find(
            state, suite=suite, case_id=case_id, run_id=run_id, limit=limit
        )
        return [j.as_dict() for j in found]

    def judgment(self, judgment_id: int) -> Row | None:
        found = JudgmentStore(self._store).get(judgment_id)
        return None if found is None else found.as_dict()

    async def decide_judgment(self, judgment_id: int, accept: bool) -> Row:
        loaded = self.loaded
        judgments = JudgmentStore(self._store)
        now = datetime.now(UTC)
        decided = await run_in(None, review.decide, loaded, judgments, judgment_id, accept, now)
        if accept:  # the label is in the suite file: the next run counts it
            await self._reload()
        if self._grading is not None:
            await self._grading().refresh_pending()
        return decided.as_dict()
