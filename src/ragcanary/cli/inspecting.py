"""The commands that read stored runs: baseline, diff, history, runs, export, storage stats."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import functools
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import (
    ConfigOption,
    JsonOption,
    SuiteOption,
    TargetOption,
    UrlOption,
    pairs,
    read_only,
    running,
    write_output,
)
from ragcanary.errors import UsageError


def baseline_accept(
    suite: SuiteOption,
    target: TargetOption,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run", help="Run to pin, or a unique prefix of its id (default: latest successful)."
        ),
    ] = None,
    change: Annotated[
        str | None,
        typer.Option(
            "--change",
            help="Pin the first good run after this change's window ended, with it as the reason.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Pin a run as the baseline of a suite on a target."""
    from ragcanary.cli.stored import accept_after_change, accept_baseline

    with running():
        loaded = read_only(config)
        pairs(loaded, suite, target)
        if change is not None and run_id is not None:
            raise UsageError("give --run or --change, not both")
        if change is not None:
            pinned = accept_after_change(loaded, suite, target, change)
        else:
            pinned = accept_baseline(loaded, suite, target, run_id)
    typer.echo(f"baseline of {suite} on {target} is now run {pinned}")


def baseline_show(
    config: ConfigOption = None, as_json: JsonOption = False, url: UrlOption = None
) -> None:
    """Show the pinned baselines (their full run ids)."""
    from ragcanary.cli.remote import fetch
    from ragcanary.cli.stored import print_baselines, stored_baselines

    with running():
        if url:
            rows = fetch(url, "/api/v1/baselines")["baselines"]
        else:
            rows = stored_baselines(read_only(config))
        print_baselines(rows, Console(), as_json)


def diff(
    suite: SuiteOption,
    target: TargetOption,
    from_run: Annotated[
        str | None,
        typer.Option(
            "--from", help="Earlier run, or a unique prefix of its id (default: the baseline)."
        ),
    ] = None,
    to_run: Annotated[
        str | None,
        typer.Option("--to", help="Later run, or a unique prefix of its id (default: the latest)."),
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """What changed between two runs: verdicts, metrics, ids that entered or left, scores."""
    from ragcanary.cli.remote import fetch
    from ragcanary.cli.stored import print_diff, stored_diff

    with running():
        if url:
            params = {"suite": suite, "target": target, "from": from_run, "to": to_run}
            found = fetch(url, "/api/v1/diff", **params)
        else:
            loaded = read_only(config)
            pairs(loaded, suite, target)
            found = stored_diff(loaded, suite, target, from_run, to_run)
        print_diff(found, Console(), as_json)


def history(
    suite: SuiteOption,
    case: Annotated[str, typer.Option(help="The canary's id.")],
    target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
    since: Annotated[str, typer.Option(help="How far back, like 1h, 7d or 30d.")] = "7d",
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """One canary over time: its verdict, query outcome, rank of each relevant id, top score."""
    from ragcanary.cli.remote import fetch
    from ragcanary.cli.stored import print_history, stored_history

    with running():
        if url:
            params = {"suite": suite, "case": case, "target": target, "since": since}
            rows = fetch(url, "/api/v1/history", **params)["history"]
        else:
            loaded = read_only(config)
            pairs(loaded, suite, target)
            rows = stored_history(loaded, suite, case, target, since)
        print_history(suite, case, rows, Console(), as_json)


def runs(
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
    outcome: Annotated[
        str | None, typer.Option(help="Only runs with this outcome: ok, regression, unavailable.")
    ] = None,
    since: Annotated[str, typer.Option(help="How far back, like 1h, 1d or 7d.")] = "1d",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """Recent runs, newest first: ids (what diff --from/--to take), outcome, metrics, deltas."""
    from ragcanary.cli.remote import fetch
    from ragcanary.cli.stored import print_runs, stored_runs

    with running():
        if outcome is not None and outcome not in ("ok", "regression", "unavailable"):
            raise UsageError(f"--outcome {outcome}: use ok, regression or unavailable")
        if url:
            params = {"suite": suite, "target": target, "outcome": outcome, "since": since}
            rows = fetch(url, "/api/v1/runs", limit=limit, **params)["runs"]
        else:
            loaded = read_only(config)
            if suite is not None or target is not None:
                pairs(loaded, suite, target)
            rows = stored_runs(
                loaded, suite=suite, target=target, outcome=outcome, since=since, limit=limit
            )
        print_runs(rows, Console(), as_json)


def export(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN", help="The run, or a unique prefix of its id.")
    ],
    format_: Annotated[
        str, typer.Option("--format", help="The file format; trec is the one there is.")
    ] = "trec",
    out: Annotated[Path, typer.Option(help="Directory to write the files into.")] = Path("."),
    config: ConfigOption = None,
) -> None:
    """Write a stored run as a TREC run file and its suite's labels as a TREC qrels file."""
    from ragcanary.cli.stored import export_trec

    with running():
        if format_ != "trec":
            raise UsageError(f"--format {format_}: the only format is trec")
        files = export_trec(read_only(config), run_id)
        for name, text in files.items():
            write_output(out / name, "--out", functools.partial(str, text))
    for name in files:
        typer.echo(f"wrote {out / name}")
    typer.echo(f"check: trec_eval -m all_trec {out / next(iter(files))} {out / list(files)[1]}")


def storage_stats(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """What the store holds (runs, rankings, canary-runs, cases) and the bytes it takes."""
    from ragcanary.cli.stored import print_footprint, stored_footprint

    with running():
        print_footprint(stored_footprint(read_only(config)), Console(), as_json)
