"""`ragcanary gate`: a candidate target (a new index) judged against the stable one before it
is promoted; exit 0 not worse, 1 worse, 2 config, 3 unavailable (docs/gate.md)."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import ConfigOption, load, running


def gate(
    suite: Annotated[str, typer.Option(help="The suite both targets answer.")],
    stable: Annotated[str, typer.Option(help="The target serving now: the baseline.")],
    candidate: Annotated[
        str, typer.Option(help="The target to promote, judged with --stable as its baseline.")
    ],
    config: ConfigOption = None,
    report: Annotated[Path | None, typer.Option(help="Write the gate's JSON here.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write a Markdown summary here.")] = None,
) -> None:
    """Gate a candidate index before promoting it: exit 0 not worse, 1 worse, 3 unavailable."""
    from ragcanary.cli.gate_cycle import check_names, gate_targets, write_gate_outputs
    from ragcanary.reports.gate import render_gate
    from ragcanary.reports.terminal import show

    with running():
        loaded = load(config)
        check_names(loaded, suite, stable, candidate)
        result = asyncio.run(gate_targets(loaded, suite, stable, candidate))
        show(Console(), render_gate(result))
    write_gate_outputs(result, report, junit, markdown)
    raise typer.Exit(result.exit_code)
