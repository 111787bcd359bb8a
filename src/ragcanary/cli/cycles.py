"""What run, compare, calibrate and validate --live do: canaries sent to live targets now."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ragcanary.errors import UsageError
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.measure.run_report import RunReport, baseline_run, build_report
from ragcanary.probe.cycle import run_cycle
from ragcanary.probe.target import make_client
from ragcanary.reports.report import failure_kinds
from ragcanary.reports.table import render_report
from ragcanary.suites.judge import settings_for
from ragcanary.suites.loaded import LoadedConfig, locate


@contextmanager
def _progress(console: Console, label: str, total: int) -> Iterator[Callable[[CaseResult], None]]:
    """A progress bar on a terminal; silence elsewhere (CI logs stay clean)."""
    if not console.is_terminal:
        yield lambda _result: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda _result: progress.advance(task)


async def _evaluate_pair(
    loaded: LoadedConfig,
    suite: str,
    target: str,
    console: Console,
    baseline: RunResult | None = None,
) -> Evaluation:
    cases = len(loaded.suites[suite].cases)
    async with make_client(loaded.config.targets[target]) as client:
        with _progress(console, f"{suite} → {target}", cases) as advance:
            return await run_cycle(
                loaded, suite, target, client, baseline=baseline, on_result=advance
            )


def _pick_baseline(reports: Sequence[RunReport], suite: str, target: str) -> RunReport | None:
    if not reports:
        return None
    for report in reports:
        if report.pair == (suite, target):
            return report
    same_suite = [r for r in reports if r.suite == suite]
    if len(same_suite) == 1:
        return same_suite[0]
    raise UsageError(
        f"--baseline holds no report for suite {suite!r} and target {target!r}; "
        "pass a report written by `ragcanary run --report` for the same suite"
    )


def _unanswered_warning(report: RunReport) -> str | None:
    """Why queries failed: per outcome a count and the first error, not only a coverage."""
    kinds = failure_kinds(report)
    if not kinds:
        return None
    total = sum(k["count"] for k in kinds.values())
    lines = [
        f"warning: {report.suite} → {report.target}: {total} of {len(report.cases)} queries "
        f"unanswered (coverage {report.coverage or 0.0:.0%})"
    ]
    for outcome, kind in sorted(kinds.items(), key=lambda item: -item[1]["count"]):
        lines.append(
            f"  {outcome}: {kind['count']} queries, first ({kind['case']}): {kind['first']}"
        )
    return "\n".join(lines)


async def run_once(
    loaded: LoadedConfig,
    pairs: Sequence[tuple[str, str]],
    baselines: Sequence[RunReport],
    console: Console,
) -> list[RunReport]:
    """`ragcanary run`: one cycle of every pair, printed as it finishes, reports returned."""
    reports = []
    for suite, target in pairs:
        chosen = _pick_baseline(baselines, suite, target)
        baseline = baseline_run(chosen, loaded.suites[suite]) if chosen else None
        evaluation = await _evaluate_pair(loaded, suite, target, console, baseline)
        report = build_report(evaluation)
        console.print(render_report(report))
        warning = _unanswered_warning(report)
        if warning:
            Console(stderr=True).print(warning, style="yellow", markup=False)
        _print_misread(loaded, evaluation)
        reports.append(report)
    return reports


def _print_misread(loaded: LoadedConfig, evaluation: Evaluation) -> None:
    """The config field whose path fit none of the answers, located like a config error."""
    found = evaluation.misread
    if found is None:
        return
    where = ("targets", found.target, found.field)
    problem = locate(loaded, where, found.message, found.fix)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"ragcanary: {problem}", markup=False)


async def compare_targets(
    loaded: LoadedConfig, suite: str, target_a: str, target_b: str, console: Console
) -> tuple[int, list[RunReport]]:
    """`ragcanary compare`: both targets on one suite, B judged with A as its baseline."""
    first = await _evaluate_pair(loaded, suite, target_a, console)
    second = await _evaluate_pair(loaded, suite, target_b, console, baseline=first.run)
    reports = [build_report(first), build_report(second)]
    for evaluation in (first, second):
        if evaluation.misread is not None:
            _print_misread(loaded, evaluation)
            return 2, reports
        if evaluation.verdict.outcome == "unavailable":
            console.print(
                f"[yellow]{evaluation.run.target} was unavailable "
                f"(coverage {evaluation.run.coverage:.0%}); nothing to compare[/]"
            )
            return 3, reports
    console.print(compare_table(second, target_a, target_b))
    drops = [f for f in second.verdict.failures if f.kind == "drop"]
    for failure in drops:
        console.print(f"[red]✗ {target_b}: {failure.message}[/]", markup=True, highlight=False)
    if not drops:
        console.print(f"[green]{target_b} is not significantly worse than {target_a}[/]")
    return (1 if drops else 0), reports


def compare_table(evaluation: Evaluation, a: str, b: str) -> Table:
    """B's verdict against A, per metric: both values, Δ, p, the 95% CI and win/tie/loss."""
    table = Table(title=f"{a} (A) vs {b} (B) on {evaluation.run.suite}", title_justify="left")
    for col in ("metric", "A", "B", "Δ (B-A)", "p (B<A)", "95% CI", "win/tie/loss"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for metric, c in evaluation.verdict.changes.items():
        table.add_row(
            metric,
            f"{c.baseline:.4f}",
            f"{c.current:.4f}",
            f"{c.delta:+.4f}",
            f"{c.p_value:.4f}",
            f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]",
            f"{c.wins}/{c.ties}/{c.losses}",
        )
    return table


async def calibrate_noise(
    loaded: LoadedConfig,
    suite: str,
    target: str,
    runs: int,
    console: Console,
    power: bool = False,
    drop: float | None = None,
) -> None:
    """`ragcanary calibrate`: N runs of the unchanged system and the noise they show; with
    ``power``, the smallest drops the verdict detects at that noise (and what ``drop`` needs)."""
    from ragcanary.measure.calibrate import measure_noise

    results = []
    for i in range(runs):
        evaluation = await _evaluate_pair(loaded, suite, target, console)
        console.print(
            f"run {i + 1}/{runs}: coverage {evaluation.run.coverage:.0%}, "
            f"{evaluation.run.duration_s:.2f}s"
        )
        results.append(evaluation.run)
    settings = settings_for(loaded.config.suites[suite], loaded.config.targets[target])
    noise = measure_noise(results, settings)
    table = Table(
        title=f"noise over {noise.runs} runs of {suite} on {target}", title_justify="left"
    )
    for col in ("signal", "mean", "std", "min", "max"):
        table.add_column(col, justify="left" if col == "signal" else "right")
    signals = {
        **noise.metrics,
        "rank overlap (RBO vs run 1)": noise.rank_overlap,
        "|score Δ| vs run 1": noise.score_delta,
        "|top score Δ| vs run 1": noise.top_score_delta,
        "coverage": noise.coverage,
    }
    for name, spread in signals.items():
        if spread is None:
            continue
        table.add_row(
            name, *(f"{v:.4f}" for v in (spread.mean, spread.std, spread.low, spread.high))
        )
    console.print(table)
    console.print(f"suggested thresholds (suites.{suite}.thresholds):")
    for key, value in noise.suggested.items():
        console.print(f"  {key}: {value:g}")
    if power:
        from ragcanary.cli.power import print_power
        from ragcanary.measure.calibrate import power_canaries

        calibrated = power_canaries(results, settings)
        print_power(console, calibrated, settings.policy, suite, drop)


async def check_live(loaded: LoadedConfig, console: Console) -> int:
    """``validate --live``: each target's request and first hits; 0, 2 (config) or 3 (down)."""
    from ragcanary.probe.live import check_target, first_query

    verdicts = []
    for name in loaded.config.targets:
        query = first_query(loaded, name) or "ragcanary live check"
        check = await check_target(loaded, name, query)
        verdicts.append(check.verdict)
        answer = check.answer
        console.print(f"{name}: {check.verdict} ({answer.outcome}, {answer.latency_s:.2f}s)")
        console.print(f"  query: {query}", markup=False, highlight=False)
        console.print(f"  sent: {check.request}", markup=False, highlight=False, soft_wrap=True)
        if answer.error:
            console.print(f"  error: {answer.error}", markup=False, highlight=False)
        for rank, (doc_id, score) in enumerate(zip(answer.ids[:3], answer.scores, strict=False)):
            shown = "-" if score is None else f"{score:.4g}"
            console.print(f"  {rank + 1}. {doc_id}  {shown}", markup=False, highlight=False)
        # A label whose document left the index is a ticket, not a config error: no exit code.
        for label in check.left_index or ():
            line = f"  left the index: case {label.case}: {label.id}"
            console.print(line, markup=False, highlight=False)
    _print_stale_labels(loaded, console)
    if "config" in verdicts:
        return 2
    return 3 if "unreachable" in verdicts else 0


def _print_stale_labels(loaded: LoadedConfig, console: Console) -> None:
    """The stale labels the newest stored run of each pair found (a ticket, not an exit code)."""
    import sqlalchemy

    from ragcanary.store.errors import StorageError
    from ragcanary.store.storage import Store

    url = sqlalchemy.make_url(loaded.config.storage)
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_file():
        return  # nothing stored yet: a check must not create the database
    store = Store.from_url(loaded.config.storage)
    try:
        if store.schema_version() is None:
            return
        for suite, cfg in loaded.config.suites.items():
            for target in cfg.targets:
                latest = store.latest_run(suite, target)
                report = store.get_report(latest["run_id"]) if latest else None
                found = report.stale_labels if report else None
                labels = found if isinstance(found, tuple) else ()
                if not labels:
                    continue
                console.print(
                    f"{suite} on {target}: {len(labels)} stale labels in the newest stored run:",
                    markup=False,
                    highlight=False,
                )
                unseen = f"no canary got it back in the last {cfg.stale_label_runs} runs"
                for label in labels:
                    why = "left the index" if label.reason == "missing" else unseen
                    line = f"  case {label.case}: {label.id} ({why})"
                    console.print(line, markup=False, highlight=False)
    except StorageError:
        pass
    finally:
        store.close()
