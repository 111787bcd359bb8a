"""What the HTTP API and the pages may ask of the daemon: a narrow protocol, and its vocabulary.

The API and the pages (``serve.http``) see the daemon only as a ``Service``: they read runs,
reports, diffs, histories, baselines, stale labels and candidates through its methods, never
through the store, the run keeper or the exporter, and they never import the daemon. An
import-linter contract in pyproject.toml keeps it so (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from ragcanary.errors import UsageError
from ragcanary.measure.results import Answer
from ragcanary.measure.run_report import IndexLookup, RunReport, StaleLabelEntry
from ragcanary.serve.schedule.reloading import ReloadResult
from ragcanary.store.change_records import Change, ChangeRequest, PairVerdict
from ragcanary.suites.loaded import LoadedConfig

OnAnswer = Callable[[int, Answer], None]  # a live search's answer to the query at that index
Pair = tuple[str, str]  # (suite, target)
Row = dict[str, Any]
RunMark = tuple[str, datetime, str]  # a run's id, start (aware UTC) and outcome
CandidateStatus = Literal["pending", "promoted", "dismissed"]


class Refused(Exception):
    """A failure report that cannot be taken: the HTTP status and the reason, for the caller."""

    def __init__(self, status: int, reason: str, counted_as: str, retry_s: float = 0.0) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.counted_as = counted_as  # ragcanary_candidates_dropped_total{reason}
        self.retry_s = retry_s  # for a 429: when the client may report again


class NoSuchJudgment(UsageError):
    """No stored judgment has the id given."""


@dataclass(frozen=True)
class DiffInputs:
    """What a diff of two runs of a pair compares: their reports, the newest outage's summary
    (None unless the later run was left to default and the newest run was unavailable), and
    each case's relevant ids (grade above 0), to mark them."""

    before: RunReport
    after: RunReport
    newest_outage: Row | None
    relevant: dict[str, set[str]]


@dataclass(frozen=True)
class ReplicaView:
    """This daemon among its replicas (PostgreSQL storage), as ``/readyz`` shows it."""

    replica_id: str
    live: int  # the replicas seen alive lately, this one included


class Service(Protocol):
    """The running daemon as the API and the pages see it (``serve.daemon_service`` makes it).

    The reads of storage block: call them in a worker thread. Each raises ``StorageError``
    when storage cannot answer; one given a run id raises ``UnknownRun`` when no stored run
    has it (nor begins with it) and ``AmbiguousRun`` when several begin with it.
    """

    # -- the daemon ------------------------------------------------------------------------

    @property
    def loaded(self) -> LoadedConfig:
        """The config in force (it changes on reload)."""
        ...

    def exposition(self) -> bytes:
        """The /metrics text."""
        ...

    async def writable(self, deadline_s: float) -> str | None:
        """None when storage takes a write within ``deadline_s``, else why not (``/readyz``)."""
        ...

    @property
    def buffered_runs(self) -> int:
        """Finished runs waiting for storage."""
        ...

    @property
    def replica(self) -> ReplicaView | None:
        """This daemon among its replicas (PostgreSQL storage), else None."""
        ...

    def next_runs(self) -> list[Row]:
        """The schedule: each job and its next run time."""
        ...

    async def reload(self) -> ReloadResult:
        """Load the config again; the old one keeps running when the new one is refused."""
        ...

    async def set_baseline(self, suite: str, target: str, run_id: str) -> None:
        """Pin ``run_id`` as the baseline of ``suite`` on ``target``."""
        ...

    async def search(
        self, target: str, queries: list[str], depth: int, on_answer: OnAnswer
    ) -> None:
        """Ask ``target`` for each of ``queries`` now, within its limits; ``on_answer(index,
        answer)`` as each comes back (the candidates page's live results)."""
        ...

    async def receive_report(
        self, body: bytes, peer: str | None, forwarded_for: Sequence[str]
    ) -> str:
        """Queue the application's failure report in ``body`` from ``peer`` (and the proxies'
        ``X-Forwarded-For``); its query as kept, redacted. ``Refused`` says why not."""
        ...

    # -- stored runs -----------------------------------------------------------------------

    def runs(
        self,
        suite: str | None,
        target: str | None,
        limit: int,
        outcome: str | None = None,
        since: datetime | None = None,
    ) -> list[Row]:
        """Summaries of the newest runs first, of one suite, target or outcome if given."""
        ...

    def latest_run(
        self,
        suite: str,
        target: str,
        *,
        outcome: str | None = None,
        exclude_unavailable: bool = True,
    ) -> Row | None:
        """The summary of the pair's newest run (with ``outcome``, if given)."""
        ...

    def resolve_run(self, given: str) -> str:
        """The stored run whose id is ``given`` or begins with it."""
        ...

    def report(self, run_id: str) -> RunReport | None:
        """The report stored for ``run_id``, or None."""
        ...

    def run_heads(self, run_ids: Iterable[str]) -> dict[str, RunReport]:
        """Each stored run's report without its cases, by run id."""
        ...

    def run_metrics(self, run_ids: Iterable[str]) -> dict[str, dict[str, float | None]]:
        """Each stored run's metrics, by run id."""
        ...

    def run_at(self, suite: str, target: str, at: datetime) -> str | None:
        """The pair's run that started last at or before ``at``."""
        ...

    def neighbours(
        self, suite: str, target: str, started_at: datetime, run_id: str
    ) -> tuple[str | None, str | None]:
        """The pair's runs just before and just after ``run_id``."""
        ...

    def recent_runs(self, suite: str, target: str, limit: int) -> list[Row]:
        """The pair's newest runs' ids, starts and outcomes, newest first."""
        ...

    def day_runs(self, pairs: Iterable[Pair], since: datetime) -> dict[Pair, list[RunMark]]:
        """Each pair's runs started at ``since`` or later, oldest first."""
        ...

    def newest_runs(self, pairs: Iterable[Pair], *, answered: bool = False) -> dict[Pair, RunMark]:
        """Each pair's newest run (its newest answered one, if ``answered``)."""
        ...

    def slo_budgets(self, suite: str | None, target: str | None) -> list[Row]:
        """The error budget of each configured SLO's pair (of ``suite`` / ``target``), from
        the stored runs of its window (docs/slo.md)."""
        ...

    def baselines(self) -> list[Row]:
        """Every pinned baseline: suite, target, run_id, set_at, and config_changes: what of
        the config changed since it was measured (``reports.pinned_config``)."""
        ...

    def baseline(self, suite: str, target: str) -> str | None:
        """The run pinned as the pair's baseline, or None."""
        ...

    # -- diffs, histories, stale labels ------------------------------------------------------

    def diff(self, suite: str, target: str, from_run: str | None, to_run: str | None) -> Row:
        """What ``ragcanary diff`` shows: by default the baseline (else the previous run)
        against the newest answered run. ``ForeignRun``: a run named is of another pair."""
        ...

    def diff_inputs(
        self, suite: str, target: str, from_run: str | None, to_run: str | None
    ) -> DiffInputs:
        """What ``diff`` compares, chosen as it says."""
        ...

    def case_history(
        self, suite: str, case_id: str, target: str | None, since: timedelta
    ) -> list[Row]:
        """One canary over ``since``: its verdict, outcome and relevant ids' ranks per run;
        ``UsageError`` when the suite in force has no such case."""
        ...

    def case_rows(
        self, suite: str, case_id: str, target: str | None, since: datetime | None
    ) -> list[Row]:
        """One canary's answer in every stored run of the suite since ``since``, oldest first."""
        ...

    def case_entries(self, run_ids: Iterable[str], case_id: str) -> dict[str, Row]:
        """One canary's whole entry in each of the reports of ``run_ids``."""
        ...

    def stale_findings(
        self, run_ids: Iterable[str]
    ) -> dict[str, tuple[tuple[StaleLabelEntry, ...] | None, IndexLookup | None]]:
        """Each run's stale labels and index lookup, as its report keeps them."""
        ...

    # -- candidates ------------------------------------------------------------------------

    def candidates(
        self, status: CandidateStatus | None, signal: str | None, since: datetime | None
    ) -> list[Row]:
        """Candidates, the most reported first."""
        ...

    def pending_page(self, signal: str | None, limit: int, offset: int) -> tuple[list[Row], int]:
        """One page of the pending candidates, and how many there are in all."""
        ...

    def candidate(self, candidate_id: int) -> Row | None:
        """One candidate, whatever its status, with its kept reports."""
        ...

    # -- changes ---------------------------------------------------------------------------

    def record_change(self, request: ChangeRequest) -> Change:
        """Record a change whose window opens now."""
        ...

    def finish_change(self, change_id: str) -> Change | None:
        """End the window of ``change_id`` now (one already closed stays); None: no such change."""
        ...

    def changes(self, limit: int) -> list[Change]:
        """The newest changes first."""
        ...

    def change(self, change_id: str) -> Change | None:
        """One change; None: no such change."""
        ...

    def change_verdicts(self, changes: Sequence[Change]) -> dict[str, list[PairVerdict]]:
        """Per change, its verdict on each configured pair whose target it names (docs/api.md,
        ``GET /api/v1/changes/{id}``)."""
        ...

    async def windows_changed(self) -> None:
        """Read the open windows again and export them (after a change was recorded or
        finished), so ``/metrics`` says so at once."""

    # -- judgments ---------------------------------------------------------------------------

    def judgments(
        self,
        state: str | None,
        suite: str | None = None,
        case_id: str | None = None,
        run_id: str | None = None,
        limit: int = 1000,
    ) -> list[Row]:
        """Judgments of a judge, newest first, of one state, suite, case or run if given."""
        ...

    def judgment(self, judgment_id: int) -> Row | None:
        """One judgment, or None."""
        ...

    async def decide_judgment(self, judgment_id: int, accept: bool) -> Row:
        """Accept (the label written into the suite file, the config reloaded) or reject a
        proposed judgment; ``UsageError`` when it cannot be (``NoSuchJudgment``: no such id)."""
        ...
