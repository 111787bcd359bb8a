"""A declared change's verdict, judged on the first run of each pair after its window.

Whichever daemon or replica makes that run judges it: the store says whether a change naming
the run's target closed between the pair's previous run and this one (``ChangeStore.due``),
and which run of the pair came last before the change started. The run is evaluated against
that one as well as against its baseline, the index asked again about what left the top-k
since then, and the change's verdict joins the report (``measure.change_verdict``). Decided
from stored runs, it is attached once per pair: the next run finds this one stored after the
window. A run made while storage cannot answer carries none (docs/report.md, ``change``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ragcanary.measure.change_verdict import change_verdict, with_change
from ragcanary.measure.endpoints import EndpointRun
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import RunReport
from ragcanary.serve.schedule.judging import Judge
from ragcanary.store.changes import ChangeStore, Due
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

Pair = tuple[str, str]
AskIndex = Callable[[Pair, RunResult, RunResult | None], Awaitable[IndexEvidence]]


class ChangeVerdicts:
    """Adds a change's verdict to the report of the first run of a pair after the change."""

    def __init__(self, keeper: RunKeeper, judge: Judge, ask_index: AskIndex) -> None:
        self._keeper = keeper
        self._judge = judge
        self._ask_index = ask_index  # what the index says of the ids that left, vs a run

    async def judged(
        self,
        loaded: LoadedConfig,
        run: RunResult,
        report: RunReport,
        endpoints: Sequence[EndpointRun] = (),
    ) -> RunReport:
        """``report`` with the verdict of the change it is the first run after, if any."""
        changes = ChangeStore(self._keeper.store)
        due: Due | None = await self._keeper.call(
            changes.due, report.suite, report.target, report.run_id, report.started_at
        )
        if due is None:
            return report
        evaluation = None
        if due.before_run_id is not None and "unavailable" not in (
            report.outcome,
            due.before_outcome,
        ):
            evaluation = await self._against(loaded, run, due.before_run_id, endpoints)
            if evaluation is None:
                return report  # storage went away in between: the next run judges it
        change = due.change
        judged = change_verdict(
            change.change_id, change.kind, due.before_run_id, due.before_outcome, report, evaluation
        )
        return with_change(report, judged)

    async def _against(
        self,
        loaded: LoadedConfig,
        run: RunResult,
        before_id: str,
        endpoints: Sequence[EndpointRun],
    ) -> Evaluation | None:
        """``run`` judged against the stored run ``before_id``; None when it cannot be read."""
        before_report: RunReport | None = await self._keeper.call(
            self._keeper.store.get_report, before_id
        )
        if before_report is None or run.suite not in loaded.suites:
            return None
        pair = (run.suite, run.target)
        before = await self._judge.decode(before_report, loaded.suites[run.suite])
        evidence = await self._ask_index(pair, run, before)
        return await self._judge.evaluate(
            loaded, run.suite, run.target, run, before, evidence, endpoints
        )
