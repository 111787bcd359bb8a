"""The ``ragcanary`` typer app: its commands and groups in help order, --version, main."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

from typing import Annotated

import typer

from ragcanary import __version__
from ragcanary.cli import (
    authoring,
    changing,
    gating,
    inspecting,
    objectives,
    probing,
    reviewing,
)

app = typer.Typer(
    name="ragcanary",
    help="Canary queries against a live retriever: exact metrics, drift, regressions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich's panels show every flag as `<bool>` under click 8.2+.
    rich_markup_mode=None,
)
import_app = typer.Typer(
    help="Convert standard IR test collections into a suite file.", rich_markup_mode=None
)
app.add_typer(import_app, name="import")
baseline_app = typer.Typer(
    help="Pin or show the baseline runs are compared with.", rich_markup_mode=None
)
app.add_typer(baseline_app, name="baseline")
candidates_app = typer.Typer(
    help="Review the application's failure reports and grow the golden set from them.",
    rich_markup_mode=None,
)
app.add_typer(candidates_app, name="candidates")
change_app = typer.Typer(
    help="Declare changes (a re-index, a model swap, a deploy): their windows hold alerts.",
    rich_markup_mode=None,
)
app.add_typer(change_app, name="change")
# `ragcanary changes show ID` (and the others) as the issue spells it: the same group.
app.add_typer(change_app, name="changes", hidden=True)
judgments_app = typer.Typer(
    help="Review a judge's grades of documents nobody labelled; measure its agreement.",
    rich_markup_mode=None,
)
app.add_typer(judgments_app, name="judgments")
storage_app = typer.Typer(
    help="What the store holds and the bytes it takes, read without changing it.",
    rich_markup_mode=None,
)
app.add_typer(storage_app, name="storage")

# Registered in the order `ragcanary --help` lists them.
app.command()(probing.run)
app.command()(probing.validate)
app.command()(probing.compare)
app.command()(gating.gate)
app.command()(authoring.bootstrap)
import_app.command("beir")(authoring.import_beir)
import_app.command("trec")(authoring.import_trec)
app.command()(probing.demo)
app.command()(probing.serve)
baseline_app.command("accept")(inspecting.baseline_accept)
baseline_app.command("show")(inspecting.baseline_show)
change_app.command("start")(changing.change_start)
change_app.command("finish")(changing.change_finish)
change_app.command("list")(changing.change_list)
change_app.command("show")(changing.change_show)
app.command()(inspecting.diff)
app.command()(inspecting.history)
app.command()(inspecting.runs)
app.command()(inspecting.export)
storage_app.command("stats")(inspecting.storage_stats)
app.command()(probing.calibrate)
app.command()(objectives.slo)
app.command()(objectives.rules)
candidates_app.command("list")(authoring.candidates_list)
candidates_app.command("show")(authoring.candidates_show)
candidates_app.command("promote")(authoring.candidates_promote)
candidates_app.command("dismiss")(authoring.candidates_dismiss)
judgments_app.command("list")(reviewing.judgments_list)
judgments_app.command("show")(reviewing.judgments_show)
judgments_app.command("accept")(reviewing.judgments_accept)
judgments_app.command("reject")(reviewing.judgments_reject)
judgments_app.command("agreement")(reviewing.judgments_agreement)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ragcanary {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    """ragcanary: know before your users do that retrieval got worse."""


def main() -> None:
    """The typer app; the ``ragcanary`` command starts in ``ragcanary.__main__``."""
    app()
