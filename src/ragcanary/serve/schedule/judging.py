"""Judging the daemon's runs off its event loop, each pair's baseline decoded once per pin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ragcanary.measure.cases import Suite
from ragcanary.measure.endpoints import EndpointRun
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import RunReport, baseline_run, build_report
from ragcanary.store.keeper import KeptReport
from ragcanary.suites.judge import judge_run
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.threads import run_in

Pair = tuple[str, str]  # (suite, target)
JudgeRun = Callable[
    [
        LoadedConfig,
        str,
        str,
        RunResult,
        RunResult | None,
        IndexEvidence | None,
        Sequence[EndpointRun],
    ],
    Evaluation,
]


@dataclass(frozen=True)
class _Decoded:
    """A baseline report decoded for one suite: valid while the run id and the suite stay."""

    run_id: str
    suite: Suite
    run: RunResult


class Judge:
    """Judges runs in a worker thread of its own and keeps each pair's decoded baseline.

    Evaluating a run against its baseline (scores, drift, paired statistics) and building its
    report are pure Python, tens of milliseconds for a suite of a few hundred canaries, and so
    is decoding the baseline's report. On the event loop that would hold up every other run's
    queries and every scrape for as long; in a thread the loop gets the interpreter back at
    least every switch interval (1 ms, as `serve` sets it). One thread: under the GIL more
    would not judge faster, only take the interpreter from the loop more often. A baseline is
    decoded again only when its run id changes (a new pin, another previous run) or the suite
    does (a reload).
    """

    def __init__(self, judge: JudgeRun = judge_run) -> None:
        self._judge = judge
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ragcanary-judge")
        self._baselines: dict[Pair, _Decoded] = {}

    async def baseline(
        self, pair: Pair, report: KeptReport | None, suite: Suite
    ) -> RunResult | None:
        """``report`` (``pair``'s baseline) as the run it holds, judged by today's ``suite``."""
        if report is None:
            self._baselines.pop(pair, None)
            return None
        kept = self._baselines.get(pair)
        if kept is not None and kept.run_id == report.run_id and kept.suite is suite:
            return kept.run
        run = await run_in(self._thread, _decoded, report, suite)
        self._baselines[pair] = _Decoded(report.run_id, suite, run)
        return run

    async def judge(
        self,
        loaded: LoadedConfig,
        suite: str,
        target: str,
        run: RunResult,
        baseline: RunResult | None,
        evidence: IndexEvidence | None = None,
        endpoints: Sequence[EndpointRun] = (),
    ) -> tuple[Evaluation, RunReport]:
        """``run`` judged against ``baseline`` (with what the index said in the run, and
        what the target's other endpoints answered), and its report."""
        return await run_in(
            self._thread, self._judged, loaded, suite, target, run, baseline, evidence, endpoints
        )

    async def decode(self, report: RunReport, suite: Suite) -> RunResult:
        """``report``'s run, judged by today's ``suite`` (``run_report.baseline_run``)."""
        return await run_in(self._thread, baseline_run, report, suite)

    async def evaluate(
        self,
        loaded: LoadedConfig,
        suite: str,
        target: str,
        run: RunResult,
        baseline: RunResult,
        evidence: IndexEvidence | None = None,
        endpoints: Sequence[EndpointRun] = (),
    ) -> Evaluation:
        """``run`` judged against another run than its baseline (a change's run before)."""
        return await run_in(
            self._thread, self._judge, loaded, suite, target, run, baseline, evidence, endpoints
        )

    def close(self) -> None:
        """Let the thread go once it is idle."""
        self._thread.shutdown(wait=False)

    def _judged(
        self,
        loaded: LoadedConfig,
        suite: str,
        target: str,
        run: RunResult,
        baseline: RunResult | None,
        evidence: IndexEvidence | None,
        endpoints: Sequence[EndpointRun],
    ) -> tuple[Evaluation, RunReport]:
        evaluation = self._judge(loaded, suite, target, run, baseline, evidence, endpoints)
        return evaluation, build_report(evaluation)


def _decoded(report: KeptReport, suite: Suite) -> RunResult:
    return baseline_run(report.report(), suite)
