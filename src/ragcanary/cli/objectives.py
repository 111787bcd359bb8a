"""The commands of the quality SLOs: the Prometheus rules they need, and their budgets now."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import (
    ConfigOption,
    JsonOption,
    UrlOption,
    load,
    pairs,
    read_only,
    running,
)
from ragcanary.errors import UsageError

FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        help="rules: a Prometheus rules file; prometheusrule: a PrometheusRule resource "
        "(Prometheus Operator).",
    ),
]


def rules(config: ConfigOption = None, fmt: FormatOption = "rules") -> None:
    """Print the recording and burn-rate alert rules of the suites' SLOs (docs/slo.md)."""
    from ragcanary.reports.slo_rules import FORMATS, render

    with running():
        if fmt not in FORMATS:
            raise UsageError(f"--format {fmt}: use {' or '.join(FORMATS)}")
        # The config alone: neither the retrievers' secrets nor the suite files are needed.
        loaded = load(config, query_targets=False, cases=False)
        slos = {
            name: suite.slo.objective_of()
            for name, suite in loaded.config.suites.items()
            if suite.slo is not None
        }
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        if not slos:
            err.print("ragcanary: no suite has an slo: (docs/slo.md); the rules have no groups")
        for name, objective in slos.items():
            if 14.4 * objective.budget > 1:  # even every answer bad burns slower than 14.4x
                err.print(
                    f"ragcanary: suites.{name}.slo.objective {objective.objective:g} is below "
                    "1 - 1/14.4 (about 0.9306): RagCanarySLOBurnFast can never fire for it, "
                    "only the ticket can (docs/slo.md)",
                    markup=False,
                )
        typer.echo(render(slos, "prometheusrule" if fmt == "prometheusrule" else "rules"), nl=False)


def slo(
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """Each SLO's error budget left and burn rates, from the stored runs of its window."""
    from ragcanary.cli.remote import fetch
    from ragcanary.reports.slo_budget import budget_rows, budget_table, objectives
    from ragcanary.reports.terminal import show

    with running():
        if url:
            rows = fetch(url, "/api/v1/slo", suite=suite, target=target)["slo"]
        else:
            from datetime import UTC, datetime

            from ragcanary.store.slo_events import SloLedger
            from ragcanary.store.storage import Store

            loaded = read_only(config)
            if suite is not None or target is not None:
                pairs(loaded, suite, target)
            slos = objectives(loaded.config.suites, suite, target)
            store = Store.from_url(loaded.config.storage)
            try:
                store.migrate()
                budgets = SloLedger().budgets(store, slos, datetime.now(UTC))
            finally:
                store.close()
            rows = budget_rows(budgets, slos)
        console = Console()
        if as_json:
            console.print_json(data=rows)
        elif not rows:
            typer.echo("no suite has an slo: (docs/slo.md)")
        else:
            show(console, budget_table(rows))
