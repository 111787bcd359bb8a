"""What `ragcanary compare` does: 2 to 10 targets on one suite, each against the reference.

The targets are asked now, all at once, each within its own concurrency and rate limit
(``probe.cycle.probe_cycle``), or, with ``--url``, their newest runs are read from a daemon.
Either way each candidate is judged with the reference's run as its baseline
(``suites.judge.judge_run``, as `run` judges a run) and the figures are put side by side by
``measure.target_comparison``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ragcanary.errors import RagcanaryError, UsageError
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.results import RunResult
from ragcanary.measure.target_comparison import (
    MAX_TARGETS,
    MIN_TARGETS,
    TargetComparison,
    compare_evaluations,
)
from ragcanary.suites.judge import judge_run, settings_for
from ragcanary.suites.loaded import LoadedConfig

EXIT_OK, EXIT_WORSE, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


class RunsTooOld(RagcanaryError):
    """A stored run of a pair is older than ``--max-age``: nothing fresh to compare (exit 3)."""

    exit_code = EXIT_UNAVAILABLE


@dataclass(frozen=True)
class Lineup:
    """The targets of one comparison: config names, their labels (a name given twice gets
    ``#2``) and which label is the reference."""

    names: tuple[str, ...]
    labels: tuple[str, ...]
    reference: int


def lineup(loaded: LoadedConfig, suite: str, names: Sequence[str], reference: str | None) -> Lineup:
    """Check the suite, the targets and the reference; a ``UsageError`` naming the fix."""
    if suite not in loaded.config.suites:
        known = ", ".join(loaded.config.suites)
        raise UsageError(f"--suite {suite}: no such suite; the config has: {known}")
    if not MIN_TARGETS <= len(names) <= MAX_TARGETS:
        raise UsageError(
            f"compare takes {MIN_TARGETS} to {MAX_TARGETS} targets, got {len(names)}; "
            "name the reference first (or pick it with --baseline-target) and its candidates"
        )
    for name in names:
        if name not in loaded.config.targets:
            raise UsageError(
                f"{name}: no such target; the config has: " + ", ".join(loaded.config.targets)
            )
    labels: list[str] = []
    for name in names:
        count = sum(1 for n in names[: len(labels) + 1] if n == name)
        labels.append(name if count == 1 else f"{name}#{count}")
    if reference is None:
        return Lineup(tuple(names), tuple(labels), 0)
    if reference not in names:
        raise UsageError(
            f"--baseline-target {reference}: not one of the targets compared "
            f"({', '.join(names)}); name one of them"
        )
    return Lineup(tuple(names), tuple(labels), list(names).index(reference))


async def probe_all(
    loaded: LoadedConfig, suite: str, targets: Lineup, console: Console
) -> list[RunResult]:
    """Every target asked the suite once, all at once, each on its own client and limits."""
    from ragcanary.probe.cycle import probe_cycle
    from ragcanary.probe.target import make_client

    cases = len(loaded.suites[suite].cases)

    async def one(name: str, label: str, advance: Callable[[], None]) -> RunResult:
        async with make_client(loaded.config.targets[name]) as client:
            run = await probe_cycle(loaded, suite, name, client, on_result=lambda _r: advance())
        return replace(run, target=label)

    with _Progress(console, [f"{suite} → {label}" for label in targets.labels], cases) as bars:
        jobs = [
            one(name, label, bars.advancer(i))
            for i, (name, label) in enumerate(zip(targets.names, targets.labels, strict=True))
        ]
        return list(await asyncio.gather(*jobs))


def judge_all(
    loaded: LoadedConfig, suite: str, targets: Lineup, runs: Sequence[RunResult]
) -> tuple[Evaluation, list[Evaluation]]:
    """The reference judged alone, each candidate with the reference's run as its baseline."""
    ref = targets.reference
    reference = judge_run(loaded, suite, targets.names[ref], runs[ref], None)
    candidates = [
        judge_run(loaded, suite, name, run, runs[ref])
        for i, (name, run) in enumerate(zip(targets.names, runs, strict=True))
        if i != ref
    ]
    return reference, candidates


def compared(
    loaded: LoadedConfig, suite: str, reference: Evaluation, candidates: Sequence[Evaluation]
) -> TargetComparison:
    """The comparison with the suite's significance and seed."""
    policy = settings_for(loaded.config.suites[suite]).policy
    return compare_evaluations(reference, candidates, policy)


def outage_code(
    evaluations: Sequence[Evaluation], console: Console, config_failures: Sequence[str] = ()
) -> int | None:
    """2 when a target's answers were unreadable, 3 when one was unavailable (each printed),
    None when every target can be compared."""
    unreadable = [e for e in evaluations if e.misread is not None]
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for evaluation in unreadable:
        err.print(f"ragcanary: {evaluation.run.target}: {evaluation.misread}", markup=False)
    for message in config_failures:
        err.print(f"ragcanary: {message}", markup=False)
    if unreadable or config_failures:
        return EXIT_USAGE
    down = [e for e in evaluations if e.verdict.outcome == "unavailable"]
    for evaluation in down:
        console.print(
            f"{evaluation.run.target} was unavailable (coverage {evaluation.run.coverage:.0%}); "
            "nothing to compare",
            style="yellow",
            markup=False,
            highlight=False,
        )
    return EXIT_UNAVAILABLE if down else None


def stored_runs(
    loaded: LoadedConfig,
    url: str,
    suite: str,
    targets: Lineup,
    max_age: timedelta,
    now: datetime | None = None,
) -> tuple[list[RunResult], list[str]]:
    """The newest run of each (suite, target) the daemon at ``url`` stored, as runs of the
    local suite's cases; and the config failures their reports name (unreadable answers).

    A pair with no run, or whose newest run started more than ``max_age`` ago, is refused
    (``RunsTooOld``, exit 3) naming the pair and its age.
    """
    from ragcanary.cli.remote import fetch
    from ragcanary.measure.report_json import unmarshal
    from ragcanary.measure.run_report import baseline_run

    moment = now or datetime.now(UTC)
    runs: list[RunResult] = []
    failures: list[str] = []
    for name, label in zip(targets.names, targets.labels, strict=True):
        rows = fetch(url, "/api/v1/runs", suite=suite, target=name, limit=1)["runs"]
        if not rows:
            raise RunsTooOld(
                f"--url {url}: the daemon has no run of suite {suite} on target {name}; "
                "compare targets it watches, or without --url to ask them now"
            )
        started = datetime.fromisoformat(rows[0]["started_at"])
        if started.tzinfo is None:
            started = started.replace(tzinfo=UTC)
        age = moment - started
        if age > max_age:
            raise RunsTooOld(
                f"--url {url}: the newest run of suite {suite} on target {name} "
                f"({rows[0]['run_id']}) started {_age(age)} ago, more than --max-age "
                f"{_age(max_age)}; raise --max-age, or compare without --url to ask it now"
            )
        report = unmarshal(fetch(url, f"/api/v1/runs/{rows[0]['run_id']}"))
        if (failure := report.config_failure()) is not None:
            failures.append(f"{name}: {failure}")
        run = baseline_run(report, loaded.suites[suite])
        runs.append(replace(run, target=label))
    return runs, failures


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _Progress:
    """One progress bar per target on a terminal; silence elsewhere (CI logs stay clean)."""

    def __init__(self, console: Console, labels: Sequence[str], total: int) -> None:
        self._progress: Progress | None = None
        self._tasks: list[TaskID] = []
        if console.is_terminal:
            columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            progress = Progress(
                TextColumn("{task.description}"), *columns, console=console, transient=True
            )
            self._tasks = [progress.add_task(label, total=total) for label in labels]
            self._progress = progress

    def advancer(self, index: int) -> Callable[[], None]:
        progress = self._progress
        if progress is None:
            return lambda: None
        task = self._tasks[index]
        return lambda: progress.advance(task)

    def __enter__(self) -> _Progress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def run_compare(
    loaded: LoadedConfig,
    suite: str,
    names: Sequence[str],
    reference: str | None,
    console: Console,
    *,
    url: str | None = None,
    max_age: timedelta = timedelta(minutes=15),
) -> tuple[int, TargetComparison | None]:
    """`ragcanary compare`: the exit code, and the comparison when the targets could be compared.

    0: no candidate significantly worse; 1: one is (each named); 2: a target's answers were
    unreadable; 3: a target was unavailable (or, with ``url``, has no run young enough).
    """
    from ragcanary.cli.cycles import compare_table
    from ragcanary.reports.comparison import verdict_lines
    from ragcanary.reports.comparison_table import render_comparison
    from ragcanary.reports.terminal import show

    targets = lineup(loaded, suite, names, reference)
    failures: list[str] = []
    if url is not None:
        runs, failures = stored_runs(loaded, url, suite, targets, max_age)
    else:
        runs = asyncio.run(probe_all(loaded, suite, targets, console))
    first, candidates = judge_all(loaded, suite, targets, runs)
    code = outage_code([first, *candidates], console, failures)
    if code is not None:
        return code, None
    comparison = compared(loaded, suite, first, candidates)
    if len(candidates) == 1:  # the A/B view: intervals and win/tie/loss per metric
        only = candidates[0]
        console.print(compare_table(only, first.run.target, only.run.target))
    show(console, render_comparison(comparison))
    worse = set(comparison.worse_targets())
    for target, line in zip(comparison.candidates, verdict_lines(comparison), strict=True):
        style = "red" if target.name in worse else "green"
        mark = "✗ " if target.name in worse else ""
        console.print(mark + line, style=style, markup=False, highlight=False)
    return (EXIT_WORSE if worse else EXIT_OK), comparison
