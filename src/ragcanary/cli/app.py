"""The ``ragcanary`` command line: parse, load config, call one function, map errors to exits."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import asyncio
import contextlib
import functools
import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ragcanary import __version__
from ragcanary.errors import ConfigError, RagcanaryError, UsageError
from ragcanary.reports.report import dump_text, load_reports
from ragcanary.suites.loaded import LoadedConfig, config_path, load_config

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

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (default: $RAGCANARY_CONFIG, else ./ragcanary.yaml).",
        show_default=False,
    ),
]


def _load(option: Path | None, *, query_targets: bool = True) -> LoadedConfig:
    return load_config(config_path(option, os.environ), os.environ, query_targets=query_targets)


def _read_only(option: Path | None) -> LoadedConfig:
    """The config for commands that only read stored runs: no retriever secret is needed."""
    return _load(option, query_targets=False)


def _fail(exc: RagcanaryError) -> typer.Exit:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    lines = [str(p) for p in exc.problems] if isinstance(exc, ConfigError) else [str(exc)]
    for line in lines:
        err.print(f"ragcanary: {line}", markup=False)
    if isinstance(exc, ConfigError) and len(lines) > 1:
        err.print(f"ragcanary: {len(lines)} problems found", markup=False)
    return typer.Exit(exc.exit_code)


@contextlib.contextmanager
def _running() -> Iterator[None]:
    """A command's work, once it imported what it needs: collect garbage again, and
    turn ragcanary's own errors into their message and exit code, never a traceback."""
    if not gc.isenabled():  # ragcanary.__main__ turned it off for start-up
        gc.freeze()
        gc.enable()
    try:
        yield
    except RagcanaryError as exc:
        raise _fail(exc) from None


def _pairs(loaded: LoadedConfig, suite: str | None, target: str | None) -> list[tuple[str, str]]:
    """The (suite, target) pairs a command works on, refusing names the config lacks."""
    suites = loaded.config.suites
    if suite is not None and suite not in suites:
        raise UsageError(f"--suite {suite}: no such suite; the config has: {', '.join(suites)}")
    if target is not None and target not in loaded.config.targets:
        known = ", ".join(loaded.config.targets)
        raise UsageError(f"--target {target}: no such target; the config has: {known}")
    pairs = [
        (s, t)
        for s, cfg in suites.items()
        if suite in (None, s)
        for t in cfg.targets
        if target in (None, t)
    ]
    if not pairs:
        raise UsageError("nothing to run: no suite uses that target; check suites.*.targets")
    return pairs


@app.command()
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
    from ragcanary.cli.commands import run_once

    with _running():
        loaded = _load(config)
        pairs = _pairs(loaded, suite, target)
        baselines = load_reports(baseline) if baseline else []
        reports = asyncio.run(run_once(loaded, pairs, baselines, Console()))
    _write_outputs(reports, report, junit, markdown)
    raise typer.Exit(_exit_code(reports))


def _write_outputs(
    reports: Sequence[dict[str, Any]],
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


def write_output(path: Path, option: str, render: Callable[[], str]) -> None:
    """Write an output file, creating its directories; a path that cannot be written is exit 2."""
    text = render()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _fail(
            UsageError(
                f"{option} {path}: cannot write it ({exc.strerror}); choose a path in a "
                "writable directory"
            )
        ) from None


def _exit_code(reports: Sequence[dict[str, Any]]) -> int:
    outcomes = {r["outcome"] for r in reports}
    if "regression" in outcomes:
        return EXIT_REGRESSION
    if "unavailable" in outcomes:
        return EXIT_UNAVAILABLE
    return EXIT_OK


@app.command()
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
    with _running():
        loaded = _load(config)
    cases = sum(len(s.cases) for s in loaded.suites.values())
    typer.echo(
        f"{loaded.path}: ok ({len(loaded.config.targets)} targets, "
        f"{len(loaded.suites)} suites, {cases} cases)"
    )
    if live:
        from ragcanary.cli.commands import check_live

        raise typer.Exit(asyncio.run(check_live(loaded, Console())))


@app.command()
def compare(
    target_a: Annotated[str, typer.Argument(metavar="TARGET_A")],
    target_b: Annotated[str, typer.Argument(metavar="TARGET_B")],
    suite: Annotated[str, typer.Option(help="The suite both targets answer.")],
    config: ConfigOption = None,
    report: Annotated[Path | None, typer.Option(help="Write both reports as JSON.")] = None,
) -> None:
    """A/B two targets on one suite; exit 1 when B is significantly worse than A."""
    from ragcanary.cli.commands import compare_targets

    with _running():
        loaded = _load(config)
        for name in (target_a, target_b):
            _pairs(loaded, suite, None)
            if name not in loaded.config.targets:
                raise UsageError(
                    f"{name}: no such target; the config has: " + ", ".join(loaded.config.targets)
                )
        code, reports = asyncio.run(compare_targets(loaded, suite, target_a, target_b, Console()))
    if report:
        write_output(report, "--report", lambda: dump_text(reports))
    raise typer.Exit(code)


@app.command()
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
    from ragcanary.cli.commands import draft

    with _running():
        loaded = _load(config)
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


@import_app.command("beir")
def import_beir(
    directory: Annotated[Path, typer.Argument(metavar="DIR")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Suite file to write.")] = Path(
        "suite.yaml"
    ),
    split: Annotated[str, typer.Option(help="qrels split to read.")] = "test",
) -> None:
    """Write a suite file from a BEIR dataset directory (queries.jsonl, qrels/SPLIT.tsv)."""
    from ragcanary.cli.commands import import_collection

    with _running():
        message = import_collection("beir", (directory,), out, split=split)
    typer.echo(message)


@import_app.command("trec")
def import_trec(
    qrels: Annotated[Path, typer.Argument(metavar="QRELS")],
    topics: Annotated[Path, typer.Argument(metavar="TOPICS")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Suite file to write.")] = Path(
        "suite.yaml"
    ),
) -> None:
    """Write a suite file from TREC qrels and topics."""
    from ragcanary.cli.commands import import_collection

    with _running():
        message = import_collection("trec", (qrels, topics), out)
    typer.echo(message)


@app.command()
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
    from ragcanary.cli.commands import run_demo
    from ragcanary.config.units import DURATION_HINT, parse_duration

    with _running():
        try:
            seconds = parse_duration(run_for) if run_for else None
        except ValueError as exc:
            raise UsageError(f"--for: {exc}; {DURATION_HINT}") from None
        code = run_demo(drift, port, listen, every, workdir, Console(), once, seconds)
    raise typer.Exit(code)


@app.command()
def serve(
    config: ConfigOption = None,
    listen: Annotated[
        str | None,
        typer.Option(help="HOST:PORT for /metrics and the API (overrides listen: in the config)."),
    ] = None,
) -> None:
    """Run the daemon: scheduled canaries, drift detection, /metrics and the API."""
    from ragcanary.cli.commands import serve as run_daemon

    with _running():
        path = config_path(config, os.environ)
        environ = dict(os.environ)
        if listen is not None:
            environ["RAGCANARY_LISTEN"] = listen  # validated and located like the config's
        code = run_daemon(path, environ)
    raise typer.Exit(code)


SuiteOption = Annotated[str, typer.Option(help="The suite.")]
TargetOption = Annotated[str, typer.Option(help="The target.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Read a running daemon's API (http://HOST:PORT) instead of the database.",
        show_default=False,
    ),
]


@baseline_app.command("accept")
def baseline_accept(
    suite: SuiteOption,
    target: TargetOption,
    run_id: Annotated[
        str | None, typer.Option("--run", help="Run to pin (default: latest successful).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Pin a run as the baseline of a suite on a target."""
    from ragcanary.cli.commands import accept_baseline

    with _running():
        loaded = _read_only(config)
        _pairs(loaded, suite, target)
        pinned = accept_baseline(loaded, suite, target, run_id)
    typer.echo(f"baseline of {suite} on {target} is now run {pinned}")


@baseline_app.command("show")
def baseline_show(
    config: ConfigOption = None, as_json: JsonOption = False, url: UrlOption = None
) -> None:
    """Show the pinned baselines (their full run ids)."""
    from ragcanary.cli.commands import print_baselines, stored_baselines
    from ragcanary.cli.remote import fetch

    with _running():
        if url:
            rows = fetch(url, "/api/v1/baselines")["baselines"]
        else:
            rows = stored_baselines(_read_only(config))
        print_baselines(rows, Console(), as_json)


@app.command()
def diff(
    suite: SuiteOption,
    target: TargetOption,
    from_run: Annotated[
        str | None, typer.Option("--from", help="Earlier run (default: the baseline).")
    ] = None,
    to_run: Annotated[
        str | None, typer.Option("--to", help="Later run (default: the latest).")
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """What changed between two runs: verdicts, metrics, ids that entered or left, scores."""
    from ragcanary.cli.commands import print_diff, stored_diff
    from ragcanary.cli.remote import fetch

    with _running():
        if url:
            params = {"suite": suite, "target": target, "from": from_run, "to": to_run}
            found = fetch(url, "/api/v1/diff", **params)
        else:
            loaded = _read_only(config)
            _pairs(loaded, suite, target)
            found = stored_diff(loaded, suite, target, from_run, to_run)
        print_diff(found, Console(), as_json)


@app.command()
def history(
    suite: SuiteOption,
    case: Annotated[str, typer.Option(help="The canary's id.")],
    target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
    since: Annotated[str, typer.Option(help="How far back, like 1h, 7d or 30d.")] = "7d",
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """One canary over time: rank of each relevant id, top score, outcome, target."""
    from ragcanary.cli.commands import print_history, stored_history
    from ragcanary.cli.remote import fetch

    with _running():
        if url:
            params = {"suite": suite, "case": case, "target": target, "since": since}
            rows = fetch(url, "/api/v1/history", **params)["history"]
        else:
            loaded = _read_only(config)
            _pairs(loaded, suite, target)
            rows = stored_history(loaded, suite, case, target, since)
        print_history(suite, case, rows, Console(), as_json)


@app.command()
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
    from ragcanary.cli.commands import print_runs, stored_runs
    from ragcanary.cli.remote import fetch

    with _running():
        if outcome is not None and outcome not in ("ok", "regression", "unavailable"):
            raise UsageError(f"--outcome {outcome}: use ok, regression or unavailable")
        if url:
            params = {"suite": suite, "target": target, "outcome": outcome, "since": since}
            rows = fetch(url, "/api/v1/runs", limit=limit, **params)["runs"]
        else:
            loaded = _read_only(config)
            if suite is not None or target is not None:
                _pairs(loaded, suite, target)
            rows = stored_runs(
                loaded, suite=suite, target=target, outcome=outcome, since=since, limit=limit
            )
        print_runs(rows, Console(), as_json)


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    format_: Annotated[
        str, typer.Option("--format", help="The file format; trec is the one there is.")
    ] = "trec",
    out: Annotated[Path, typer.Option(help="Directory to write the files into.")] = Path("."),
    config: ConfigOption = None,
) -> None:
    """Write a stored run as a TREC run file and its suite's labels as a TREC qrels file."""
    from ragcanary.cli.commands import export_trec

    with _running():
        if format_ != "trec":
            raise UsageError(f"--format {format_}: the only format is trec")
        files = export_trec(_read_only(config), run_id)
        for name, text in files.items():
            write_output(out / name, "--out", functools.partial(str, text))
    for name in files:
        typer.echo(f"wrote {out / name}")
    typer.echo(f"check: trec_eval -m all_trec {out / next(iter(files))} {out / list(files)[1]}")


@app.command()
def calibrate(
    suite: SuiteOption,
    target: TargetOption,
    runs: Annotated[int, typer.Option(min=2, help="How many runs of the unchanged system.")] = 5,
    config: ConfigOption = None,
) -> None:
    """Run the unchanged system N times; show the noise of every signal and fitting thresholds."""
    from ragcanary.cli.commands import calibrate_noise

    with _running():
        loaded = _load(config)
        _pairs(loaded, suite, target)
        asyncio.run(calibrate_noise(loaded, suite, target, runs, Console()))


candidates_app = typer.Typer(
    help="Review the application's failure reports and grow the golden set from them.",
    rich_markup_mode=None,
)
app.add_typer(candidates_app, name="candidates")
CandidateArg = Annotated[int, typer.Argument(help="The candidate's id (from `candidates list`).")]


@candidates_app.command("list")
def candidates_list(
    signal: Annotated[str | None, typer.Option(help="Only those reported with it.")] = None,
    since: Annotated[str | None, typer.Option(help="Reported this recently, like 7d.")] = None,
    status: Annotated[str, typer.Option(help="pending, promoted or dismissed.")] = "pending",
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Candidates waiting for review, the most reported first."""
    from ragcanary.cli.candidates import list_candidates, print_candidates

    with _running():
        rows = list_candidates(_read_only(config), signal, since, status)
        print_candidates(rows, Console(), as_json)


@candidates_app.command("show")
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

    with _running():
        loaded = _load(config)
        if target is not None:
            _pairs_of_target(loaded, target)
        shown = asyncio.run(show_candidate(loaded, candidate, target, depth))
        print_shown(shown, Console(), as_json)


@candidates_app.command("promote")
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
    with _running():
        loaded = _read_only(config)
        case = promote(loaded, candidate, suite, ids, grade, negative, max_score, labels)
    typer.echo(
        f"candidate {candidate} is case {case} of suite {suite}; "
        "a running daemon takes it at its next reload"
    )


@candidates_app.command("dismiss")
def candidates_dismiss(
    candidate: CandidateArg,
    reason: Annotated[str, typer.Option(help="Why it is no canary.")],
    config: ConfigOption = None,
) -> None:
    """Mark a candidate reviewed and not worth a canary."""
    from ragcanary.cli.candidates import dismiss

    with _running():
        dismiss(_read_only(config), candidate, reason)
    typer.echo(f"candidate {candidate} dismissed")


def _pairs_of_target(loaded: LoadedConfig, target: str) -> None:
    if target not in loaded.config.targets:
        known = ", ".join(loaded.config.targets)
        raise UsageError(f"--target {target}: no such target; the config has: {known}")


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
