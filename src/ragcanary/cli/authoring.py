"""The commands that grow the suites: bootstrap drafts, imports, and reviewed candidates."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragcanary.cli.common import ConfigOption, JsonOption, SuiteOption, load, read_only, running
from ragcanary.errors import UsageError
from ragcanary.suites.loaded import LoadedConfig

CandidateArg = Annotated[int, typer.Argument(help="The candidate's id (from `candidates list`).")]


def bootstrap(
    target: Annotated[str, typer.Option(help="Target to ask.")],
    queries: Annotated[Path, typer.Option(help="One query per line (or .jsonl with 'query').")],
    config: ConfigOption = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the draft here (default: stdout).")
    ] = None,
    depth: Annotated[int, typer.Option(help="Results to show per query.")] = 10,
) -> None:
    """Draft a suite from live results, for a person to label."""
    from ragcanary.cli.drafts import draft

    with running():
        loaded = load(config)
        if target not in loaded.config.targets:
            raise UsageError(
                f"--target {target}: no such target; the config has: "
                + ", ".join(loaded.config.targets)
            )
        text = asyncio.run(draft(loaded, target, queries, depth))
    if out:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}; label each case's `relevant:` from the listed results")
    else:
        sys.stdout.write(text)


def import_beir(
    directory: Annotated[Path, typer.Argument(metavar="DIR")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Suite file to write.")] = Path(
        "suite.yaml"
    ),
    split: Annotated[str, typer.Option(help="qrels split to read.")] = "test",
) -> None:
    """Write a suite file from a BEIR dataset directory (queries.jsonl, qrels/SPLIT.tsv)."""
    from ragcanary.cli.drafts import import_collection

    with running():
        message = import_collection("beir", (directory,), out, split=split)
    typer.echo(message)


def import_trec(
    qrels: Annotated[Path, typer.Argument(metavar="QRELS")],
    topics: Annotated[Path, typer.Argument(metavar="TOPICS")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Suite file to write.")] = Path(
        "suite.yaml"
    ),
) -> None:
    """Write a suite file from TREC qrels and topics."""
    from ragcanary.cli.drafts import import_collection

    with running():
        message = import_collection("trec", (qrels, topics), out)
    typer.echo(message)


def candidates_list(
    signal: Annotated[str | None, typer.Option(help="Only those reported with it.")] = None,
    since: Annotated[str | None, typer.Option(help="Reported this recently, like 7d.")] = None,
    status: Annotated[str, typer.Option(help="pending, promoted or dismissed.")] = "pending",
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Candidates waiting for review, the most reported first."""
    from ragcanary.cli.candidates import list_candidates, print_candidates

    with running():
        rows = list_candidates(read_only(config), signal, since, status)
        print_candidates(rows, Console(), as_json)


def candidates_show(
    candidate: CandidateArg,
    target: Annotated[
        str | None, typer.Option(help="Ask this target (default: the one reported).")
    ] = None,
    depth: Annotated[int, typer.Option(min=1, help="How many hits to show.")] = 10,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """A candidate, its reports, and what the live target returns for it now."""
    from ragcanary.cli.candidates import print_shown, show_candidate

    with running():
        loaded = load(config)
        if target is not None:
            _pairs_of_target(loaded, target)
        shown = asyncio.run(show_candidate(loaded, candidate, target, depth))
        print_shown(shown, Console(), as_json)


def candidates_promote(
    candidate: CandidateArg,
    suite: SuiteOption,
    relevant: Annotated[
        str | None, typer.Option(help="The ids a good answer holds: ID[,ID].")
    ] = None,
    grade: Annotated[int, typer.Option(min=1, help="Their grade.")] = 1,
    negative: Annotated[
        bool, typer.Option("--negative", help="An off-topic canary: nothing may score high.")
    ] = False,
    max_score: Annotated[float | None, typer.Option(help="A negative canary's bound.")] = None,
    tags: Annotated[str | None, typer.Option(help="Tags: TAG[,TAG].")] = None,
    config: ConfigOption = None,
) -> None:
    """Append the candidate to a suite file as a case (comments kept) and mark it done."""
    from ragcanary.cli.candidates import promote

    ids = [i.strip() for i in (relevant or "").split(",") if i.strip()]
    labels = [t.strip() for t in (tags or "").split(",") if t.strip()]
    with running():
        loaded = read_only(config)
        case = promote(loaded, candidate, suite, ids, grade, negative, max_score, labels)
    typer.echo(
        f"candidate {candidate} is case {case} of suite {suite}; "
        "a running daemon takes it at its next reload"
    )


def candidates_dismiss(
    candidate: CandidateArg,
    reason: Annotated[str, typer.Option(help="Why it is no canary.")],
    config: ConfigOption = None,
) -> None:
    """Mark a candidate reviewed and not worth a canary."""
    from ragcanary.cli.candidates import dismiss

    with running():
        dismiss(read_only(config), candidate, reason)
    typer.echo(f"candidate {candidate} dismissed")


def _pairs_of_target(loaded: LoadedConfig, target: str) -> None:
    if target not in loaded.config.targets:
        known = ", ".join(loaded.config.targets)
        raise UsageError(f"--target {target}: no such target; the config has: {known}")
