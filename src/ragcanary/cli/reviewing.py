"""The `ragcanary judgments` commands: list, show, accept, reject, agreement."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import ConfigOption, JsonOption, UrlOption, read_only, running
from ragcanary.errors import UsageError
from ragcanary.suites.loaded import LoadedConfig

JudgmentArg = Annotated[int, typer.Argument(help="The judgment's id (from `judgments list`).")]
STATES = ("queued", "proposed", "refused", "accepted", "rejected", "all")


def _local(config: ConfigOption, url: str | None) -> LoadedConfig | None:
    return None if url is not None else read_only(config)


def judgments_list(
    state: Annotated[
        str, typer.Option(help="queued, proposed, refused, accepted, rejected or all.")
    ] = "proposed",
    suite: Annotated[str | None, typer.Option(help="Only this suite's.")] = None,
    run: Annotated[str | None, typer.Option(help="Only those of this run.")] = None,
    config: ConfigOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """A judge's grades of documents nobody labelled, newest first (proposed by default)."""
    from ragcanary.cli.judgments import list_judgments, print_judgments

    with running():
        if state not in STATES:
            raise UsageError(f"--state {state}: write one of {', '.join(STATES)}")
        rows = list_judgments(_local(config, url), url, state, suite, run)
        print_judgments(rows, Console(), as_json)


def judgments_show(
    judgment: JudgmentArg,
    config: ConfigOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """One judgment: the document, the query, the judge's grade and why it gave none."""
    from ragcanary.cli.judgments import print_judgment, show_judgment

    with running():
        print_judgment(show_judgment(_local(config, url), url, judgment), Console(), as_json)


def judgments_accept(
    judgment: JudgmentArg, config: ConfigOption = None, url: UrlOption = None
) -> None:
    """Write the judge's grade into the suite file as a label (comments kept)."""
    from ragcanary.cli.judgments import decide

    with running():
        row = decide(_local(config, url), url, judgment, accept=True)
    where = "the daemon reloaded" if url else "a running daemon takes it at its next reload"
    typer.echo(
        f"judgment {judgment} accepted: {row['doc_id']} is grade {row['grade']} in case "
        f"{row['case']} of suite {row['suite']}; {where}"
    )


def judgments_reject(
    judgment: JudgmentArg, config: ConfigOption = None, url: UrlOption = None
) -> None:
    """Reject the judge's grade: nothing is written, and it is not proposed again."""
    from ragcanary.cli.judgments import decide

    with running():
        decide(_local(config, url), url, judgment, accept=False)
    typer.echo(f"judgment {judgment} rejected")


def judgments_agreement(
    judge: Annotated[str | None, typer.Option(help="Only this judge's grades.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cohen's kappa between a judge's grades and people's decisions on them."""
    from ragcanary.cli.judgments import agreement, print_agreement

    with running():
        print_agreement(agreement(read_only(config), judge), Console(), as_json)
