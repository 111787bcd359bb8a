"""The commands that probe targets: run, validate, compare, calibrate, and serve and demo."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import (
    ConfigOption,
    SuiteOption,
    TargetOption,
    load,
    pairs,
    read_only,
    running,
    write_output,
)
from ragcanary.errors import UsageError
from ragcanary.measure.run_report import RunReport
from ragcanary.measure.target_comparison import TargetComparison
from ragcanary.reports.report import dump_text, load_reports
from ragcanary.suites.loaded import config_path

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


def run(
    config: ConfigOption = None,
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
    baseline: Annotated[
        Path | None, typer.Option(help="Compare with this earlier --report file.")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the report JSON here.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write a Markdown summary here.")] = None,
) -> None:
    """Run every canary once now and gate on it: exit 0 pass, 1 regression, 3 unavailable."""
    from ragcanary.cli.cycles import run_once

    with running():
        loaded = load(config)
        chosen = pairs(loaded, suite, target)
        baselines = load_reports(baseline) if baseline else []
        reports = asyncio.run(run_once(loaded, chosen, baselines, Console()))
    _write_outputs(reports, report, junit, markdown)
    raise typer.Exit(_exit_code(reports))


def _write_outputs(
    reports: Sequence[RunReport],
    report: Path | None,
    junit: Path | None,
    markdown: Path | None,
) -> None:
    # Each renderer is imported only when its file is asked for: a plain run spares the time.
    if report:
        write_output(report, "--report", lambda: dump_text(reports))
    if junit:
        from ragcanary.reports.junit import render_junit_many

        write_output(junit, "--junit", lambda: render_junit_many(reports))
    if markdown:
        from ragcanary.reports.markdown import render_markdown

        write_output(markdown, "--markdown", lambda: "\n\n".join(map(render_markdown, reports)))


def _exit_code(reports: Sequence[RunReport]) -> int:
    outcomes = {r.outcome for r in reports}
    if "regression" in outcomes:
        return EXIT_REGRESSION
    # Unavailable because the config's response paths fit none of the answers: a config error.
    if any(r.config_failure() for r in reports):
        return EXIT_USAGE
    if "unavailable" in outcomes:
        return EXIT_UNAVAILABLE
    return EXIT_OK


def validate(
    config: ConfigOption = None,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Also send one canary to every target (embedded first where it needs it) and "
            "show the request and the first hits; exit 2 if a target's config does not fit "
            "what answered, 3 if a target or embedding endpoint is unreachable.",
        ),
    ] = False,
) -> None:
    """Check the config and every suite file; print every problem with file, path and line."""
    with running():
        loaded = load(config)
    cases = sum(len(s.cases) for s in loaded.suites.values())
    typer.echo(
        f"{loaded.path}: ok ({len(loaded.config.targets)} targets, "
        f"{len(loaded.suites)} suites, {cases} cases)"
    )
    if live:
        from ragcanary.cli.cycles import check_live

        raise typer.Exit(asyncio.run(check_live(loaded, Console())))


def compare(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="TARGET TARGET [TARGET ...]",
            help="2 to 10 targets; the first is the reference unless --baseline-target says.",
            show_default=False,
        ),
    ],
    suite: Annotated[str, typer.Option(help="The suite every target answers.")],
    config: ConfigOption = None,
    baseline_target: Annotated[
        str | None,
        typer.Option(
            "--baseline-target",
            help="The reference the others are judged against (default: the first).",
        ),
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the comparison JSON here.")] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="Write the comparison as Markdown here.")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Compare the newest runs a running daemon (http://HOST:PORT) stored of each "
            "target instead of asking the targets now.",
            show_default=False,
        ),
    ] = None,
    max_age: Annotated[
        str, typer.Option(help="With --url: the oldest stored run used, like 15m (else exit 3).")
    ] = "15m",
) -> None:
    """Compare 2 to 10 targets on one suite; exit 1 when one is significantly worse than the
    reference."""
    from datetime import timedelta

    from ragcanary.cli.comparing import run_compare
    from ragcanary.config.units import DURATION_HINT, parse_duration

    with running():
        try:
            oldest = timedelta(seconds=parse_duration(max_age))
        except ValueError as exc:
            raise UsageError(f"--max-age: {exc}; {DURATION_HINT}") from None
        loaded = read_only(config) if url else load(config)
        code, comparison = run_compare(
            loaded, suite, targets, baseline_target, Console(), url=url, max_age=oldest
        )
    if comparison is not None:
        _write_comparison(comparison, report, markdown, junit)
    raise typer.Exit(code)


def _write_comparison(
    comparison: TargetComparison, report: Path | None, markdown: Path | None, junit: Path | None
) -> None:
    from ragcanary.reports.comparison import (
        dump_comparison,
        render_comparison_junit,
        render_comparison_markdown,
    )

    if report:
        write_output(report, "--report", lambda: dump_comparison(comparison))
    if markdown:
        write_output(markdown, "--markdown", lambda: render_comparison_markdown(comparison))
    if junit:
        write_output(junit, "--junit", lambda: render_comparison_junit(comparison))


def calibrate(
    suite: SuiteOption,
    target: TargetOption,
    runs: Annotated[int, typer.Option(min=2, help="How many runs of the unchanged system.")] = 5,
    power: Annotated[
        bool,
        typer.Option(
            "--power", help="Also the smallest drop of each metric the verdict detects (80%)."
        ),
    ] = False,
    drop: Annotated[
        float | None,
        typer.Option(
            help="How many canaries a drop this large (0 to 1) needs; implies --power.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run the unchanged system N times; show the noise of every signal and fitting thresholds.

    With --power, also the statistical power of the verdict at this noise (docs/cli.md).
    """
    from ragcanary.cli.cycles import calibrate_noise

    with running():
        if drop is not None and not 0.0 < drop <= 1.0:
            raise UsageError(f"--drop {drop:g}: a drop of a metric lies in (0, 1]; try --drop 0.01")
        loaded = load(config)
        pairs(loaded, suite, target)
        wanted = power or drop is not None
        asyncio.run(calibrate_noise(loaded, suite, target, runs, Console(), wanted, drop))


def demo(
    drift: Annotated[
        str,
        typer.Option(help="Start the retriever degraded: drop-docs, shift-scores, shuffle, down."),
    ] = "normal",
    port: Annotated[int, typer.Option(help="Port of the demo retriever (0: any free one).")] = 8088,
    listen: Annotated[str, typer.Option(help="Where ragcanary serves metrics and the API.")] = (
        "127.0.0.1:9464"
    ),
    every: Annotated[str, typer.Option(help="How often the canaries run.")] = "5s",
    workdir: Annotated[
        Path, typer.Option(help="Where the demo writes its config and data.")
    ] = Path("ragcanary-demo"),
    once: Annotated[
        bool, typer.Option(help="Run the canaries once, print the table, exit.")
    ] = False,
    run_for: Annotated[
        str | None, typer.Option("--for", help="Stop after this long, like 30s (default: Ctrl-C).")
    ] = None,
) -> None:
    """Start the bundled demo retriever and the daemon watching it."""
    from ragcanary.cli.serving import run_demo
    from ragcanary.config.units import DURATION_HINT, parse_duration

    with running():
        try:
            seconds = parse_duration(run_for) if run_for else None
        except ValueError as exc:
            raise UsageError(f"--for: {exc}; {DURATION_HINT}") from None
        code = run_demo(drift, port, listen, every, workdir, Console(), once, seconds)
    raise typer.Exit(code)


def serve(
    config: ConfigOption = None,
    listen: Annotated[
        str | None,
        typer.Option(help="HOST:PORT for /metrics and the API (overrides listen: in the config)."),
    ] = None,
) -> None:
    """Run the daemon: scheduled canaries, drift detection, /metrics and the API."""
    from ragcanary.cli.serving import serve as run_daemon

    with running():
        path = config_path(config, os.environ)
        environ = dict(os.environ)
        if listen is not None:
            environ["RAGCANARY_LISTEN"] = listen  # validated and located like the config's
        code = run_daemon(path, environ)
    raise typer.Exit(code)
