"""What each CLI command does, between parsing its arguments and printing its result."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ragcanary.errors import UsageError
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.cycle import run_cycle, settings_for
from ragcanary.probe.target import make_client
from ragcanary.reports.report import failure_kinds, run_from_report, to_report
from ragcanary.reports.table import render_report
from ragcanary.suites.loaded import LoadedConfig

if TYPE_CHECKING:
    from ragcanary.store.storage import Store


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


def _pick_baseline(
    reports: Sequence[Mapping[str, Any]], suite: str, target: str
) -> Mapping[str, Any] | None:
    if not reports:
        return None
    for report in reports:
        if report["suite"] == suite and report["target"] == target:
            return report
    same_suite = [r for r in reports if r["suite"] == suite]
    if len(same_suite) == 1:
        return same_suite[0]
    raise UsageError(
        f"--baseline holds no report for suite {suite!r} and target {target!r}; "
        "pass a report written by `ragcanary run --report` for the same suite"
    )


def _unanswered_warning(report: Mapping[str, Any]) -> str | None:
    """Why queries failed: per outcome a count and the first error, not only a coverage."""
    kinds = failure_kinds(report)
    if not kinds:
        return None
    total = sum(k["count"] for k in kinds.values())
    cases = len(report.get("cases") or ())
    lines = [
        f"warning: {report['suite']} → {report['target']}: {total} of {cases} queries "
        f"unanswered (coverage {report['coverage']:.0%})"
    ]
    for outcome, kind in sorted(kinds.items(), key=lambda item: -item[1]["count"]):
        lines.append(
            f"  {outcome}: {kind['count']} queries, first ({kind['case']}): {kind['first']}"
        )
    return "\n".join(lines)


async def run_once(
    loaded: LoadedConfig,
    pairs: Sequence[tuple[str, str]],
    baselines: Sequence[Mapping[str, Any]],
    console: Console,
) -> list[dict[str, Any]]:
    """`ragcanary run`: one cycle of every pair, printed as it finishes, reports returned."""
    reports = []
    for suite, target in pairs:
        chosen = _pick_baseline(baselines, suite, target)
        baseline = run_from_report(chosen, loaded.suites[suite]) if chosen else None
        evaluation = await _evaluate_pair(loaded, suite, target, console, baseline)
        report = to_report(evaluation)
        console.print(render_report(report))
        warning = _unanswered_warning(report)
        if warning:
            Console(stderr=True).print(warning, style="yellow", markup=False)
        reports.append(report)
    return reports


async def compare_targets(
    loaded: LoadedConfig, suite: str, target_a: str, target_b: str, console: Console
) -> tuple[int, list[dict[str, Any]]]:
    """`ragcanary compare`: both targets on one suite, B judged with A as its baseline."""
    first = await _evaluate_pair(loaded, suite, target_a, console)
    second = await _evaluate_pair(loaded, suite, target_b, console, baseline=first.run)
    reports = [to_report(first), to_report(second)]
    for evaluation in (first, second):
        if evaluation.verdict.outcome == "unavailable":
            console.print(
                f"[yellow]{evaluation.run.target} was unavailable "
                f"(coverage {evaluation.run.coverage:.0%}); nothing to compare[/]"
            )
            return 3, reports
    console.print(_compare_table(second, target_a, target_b))
    drops = [f for f in second.verdict.failures if f.kind == "drop"]
    for failure in drops:
        console.print(f"[red]✗ {target_b}: {failure.message}[/]", markup=True, highlight=False)
    if not drops:
        console.print(f"[green]{target_b} is not significantly worse than {target_a}[/]")
    return (1 if drops else 0), reports


def _compare_table(evaluation: Evaluation, a: str, b: str) -> Table:
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


async def draft(loaded: LoadedConfig, target: str, queries: Path, depth: int) -> str:
    """`ragcanary bootstrap`: a draft suite from live answers."""
    from contextlib import AsyncExitStack

    from ragcanary.probe.bootstrap import draft_suite, read_queries
    from ragcanary.probe.cycle import open_target

    texts = read_queries(queries)
    cfg = loaded.config.targets[target]
    async with make_client(cfg) as client, AsyncExitStack() as stack:
        asked, embed = await open_target(stack, loaded, target, client)
        return await draft_suite(asked, texts, depth, concurrency=cfg.concurrency, embed=embed)


def import_collection(kind: str, paths: Sequence[Path], out: Path, split: str = "test") -> str:
    """`ragcanary import beir|trec`: write a suite file and say what was written."""
    from ragcanary.suites.importers import read_beir, read_trec
    from ragcanary.suites.suite import dump_suite

    imported = read_beir(paths[0], split) if kind == "beir" else read_trec(paths[0], paths[1])
    dump_suite(imported.cases, out)
    skipped = (
        f"; skipped {imported.skipped} queries without relevant documents"
        if imported.skipped
        else ""
    )
    return f"wrote {len(imported.cases)} cases to {out}{skipped}"


def run_demo(
    mode: str,
    port: int,
    listen: str,
    every: str,
    workdir: Path,
    console: Console,
    once: bool = False,
    run_for: float | None = None,
) -> int:
    """`ragcanary demo`: the bundled retriever and the daemon watching it (or one gated run)."""
    import asyncio

    try:
        from ragcanary.demo.retriever import MODES, BackgroundServer
    except ModuleNotFoundError as exc:
        if exc.name != "bm25s":
            raise
        raise UsageError(
            "the demo retriever needs the demo extra: pip install 'ragcanary[demo]'"
        ) from None
    from ragcanary.serve.httpserver import check_address
    from ragcanary.suites.loaded import load_config

    if mode not in MODES:
        raise UsageError(f"--drift {mode}: unknown mode; use one of {', '.join(MODES)}")
    if not once:
        check_address(listen)  # before the retriever starts and the banner is printed
    with BackgroundServer(port=port, mode=mode) as retriever:
        path = write_demo_config(workdir, retriever.port, listen, every)
        loaded = load_config(path, {})
        api = f"http://{_browsable(loaded.config.listen)}"
        if not once:
            console.print(f"open {api}/ui/ in a browser: what regressed, and why", soft_wrap=True)
        console.print(
            f"demo retriever: {retriever.url} (mode [bold]{mode}[/]); config: {path}",
            soft_wrap=True,
        )
        if once:
            reports = asyncio.run(run_once(loaded, [("demo", "demo-bm25")], [], console))
            return {"ok": 0, "regression": 1, "unavailable": 3}[reports[0]["outcome"]]
        cli = _runnable_cli()
        console.print(
            f"""ragcanary is watching it every {every}:
  web pages   {api}/ui/
  metrics     {api}/metrics
  runs        {api}/api/v1/runs?suite=demo&target=demo-bm25
  API docs    {api}/docs
Switch the retriever into an incident while it runs (drop-docs, shift-scores, shuffle, down):
  curl -X POST {retriever.url}/mode -H 'content-type: application/json' -d '{{"mode": "drop-docs"}}'
Then see what changed: {api}/ui/ or
  {cli} diff -c {path} --suite demo --target demo-bm25
  curl -s {api}/metrics | grep -E 'ragcanary_(hit_rate|regression|rank_overlap|score_drift)'
Ctrl-C stops the demo.""",
            highlight=False,
            markup=False,
            soft_wrap=True,  # never break the commands a newcomer copies
        )
        return serve(path, {}, run_for=run_for)


DEMO_CONFIG = """\
# Written by `ragcanary demo`: the bundled BM25 retriever and its hand-labelled suite.
storage: sqlite:///{workdir}/ragcanary.db
listen: {listen}
targets:
  demo-bm25:
    url: http://127.0.0.1:{port}/search
    method: POST
    body: {{q: "{{query}}", limit: "{{k}}"}}
    results: hits
    id: id
    score: score
    timeout: 5s
    concurrency: 8
suites:
  demo:
    cases: suite.yaml
    targets: [demo-bm25]
    every: {every}
    k: [1, 3, 5, 10]
    depth: 10
    thresholds:
      hit_rate: {{5: 0.6}}
      max_drop: 0.02
"""


def _browsable(listen: str) -> str:
    """HOST:PORT a browser on this machine opens for ``listen`` (a wildcard host is not one)."""
    host, _, port = listen.rpartition(":")
    if host in ("0.0.0.0", "[::]", ""):
        host = "127.0.0.1"
    return f"{host}:{port}"


def _runnable_cli() -> str:
    """How to call ragcanary from here: after `make demo` it is .venv/bin/ragcanary, off PATH.

    Said the way the README says it (a path relative to the working directory).
    """
    import os
    import shutil
    import sys

    if shutil.which("ragcanary"):
        return "ragcanary"
    beside = Path(sys.executable).with_name("ragcanary")
    if beside.exists():
        try:
            return os.path.relpath(beside)
        except ValueError:
            return str(beside)
    return f"{sys.executable} -m ragcanary"


def write_demo_config(workdir: Path, port: int, listen: str, every: str) -> Path:
    """Write the demo's config and suite into ``workdir`` with a fresh database; return the config.

    Each demo starts from an empty database so that a baseline left by an earlier demo,
    perhaps in a degraded mode, cannot confuse a newcomer.
    """
    from importlib.resources import files

    workdir.mkdir(parents=True, exist_ok=True)
    for leftover in workdir.glob("ragcanary.db*"):
        leftover.unlink()
    suite = files("ragcanary.demo").joinpath("suite.yaml").read_text(encoding="utf-8")
    (workdir / "suite.yaml").write_text(suite, encoding="utf-8")
    path = workdir / "ragcanary.yaml"
    text = DEMO_CONFIG.format(port=port, workdir=workdir.resolve(), listen=listen, every=every)
    path.write_text(text, encoding="utf-8")
    return path


def serve(config_file: Path, environ: Mapping[str, str], run_for: float | None = None) -> int:
    """`ragcanary serve`: load the config, set up logging once, run the daemon until stopped.

    ``run_for`` stops it after that many seconds (the demo's ``--for``).
    """
    import asyncio
    import os

    from ragcanary.logs import RedactSecrets, configure_logging
    from ragcanary.serve.collector import tune_collector, tune_switching
    from ragcanary.serve.daemon import Daemon
    from ragcanary.serve.httpserver import check_address
    from ragcanary.suites.loaded import load_config

    loaded = load_config(config_file, environ)
    check_address(loaded.config.listen)
    redactor = RedactSecrets(loaded.secrets)
    configure_logging(loaded.config.log_level, loaded.config.log_format, redactor)
    daemon = Daemon(config_file, dict(os.environ), loaded, redactor=redactor)
    tune_collector()
    tune_switching()

    async def main() -> int:
        if run_for is not None:
            asyncio.get_running_loop().call_later(run_for, daemon.request_stop, "--for elapsed")
        return await daemon.run()

    return asyncio.run(main())


def _store(loaded: LoadedConfig) -> Store:
    from ragcanary.store.storage import Store

    store = Store.from_url(loaded.config.storage)
    store.migrate()
    return store


def accept_baseline(loaded: LoadedConfig, suite: str, target: str, run_id: str | None) -> str:
    """`ragcanary baseline accept`: pin ``run_id``, by default the latest successful run."""
    store = _store(loaded)
    try:
        if run_id is None:
            latest = store.latest_run(suite, target, outcome="ok")
            if latest is None:
                raise UsageError(
                    f"no successful run of suite {suite!r} on target {target!r} stored yet; "
                    "let the daemon run once or pass --run"
                )
            run_id = str(latest["run_id"])
        report = store.get_report(run_id)
        if report is None or (report["suite"], report["target"]) != (suite, target):
            raise UsageError(f"--run {run_id}: no run of suite {suite!r} on target {target!r}")
        store.set_baseline(suite, target, run_id)
        return run_id
    finally:
        store.close()


def stored_baselines(loaded: LoadedConfig) -> list[dict[str, Any]]:
    """`ragcanary baseline show` from the database."""
    store = _store(loaded)
    try:
        return store.baselines()
    finally:
        store.close()


def print_baselines(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(data=list(rows), default=str)
        return
    table = Table(title="pinned baselines", title_justify="left")
    for col in ("suite", "target", "run", "pinned at"):
        # The run id is what diff --from takes: shown whole, wrapped if need be.
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["suite"], row["target"], row["run_id"], str(row["set_at"]))
    console.print(table if rows else "no baseline pinned yet")


def stored_diff(
    loaded: LoadedConfig, suite: str, target: str, from_run: str | None, to_run: str | None
) -> dict[str, Any]:
    """`ragcanary diff` from the database."""
    from ragcanary.reports.oncall import relevant_ids, run_diff

    store = _store(loaded)
    try:
        depth = loaded.config.suites[suite].depth
        relevant = relevant_ids(loaded.suites[suite].cases)
        return run_diff(store, suite, target, from_run, to_run, depth, relevant)
    finally:
        store.close()


def print_diff(diff: Mapping[str, Any], console: Console, as_json: bool) -> None:
    from ragcanary.reports.table import render_diff

    if as_json:
        console.print_json(data=diff, default=str)
    else:
        console.print(render_diff(diff))


def stored_history(
    loaded: LoadedConfig, suite: str, case: str, target: str | None, since: str
) -> list[dict[str, Any]]:
    """`ragcanary history` from the database."""
    from datetime import timedelta

    from ragcanary.reports.oncall import case_history

    cases = loaded.suites[suite].by_id
    if case not in cases:
        raise UsageError(f"--case {case}: no such case in suite {suite!r}")
    window = timedelta(seconds=_since(since))
    store = _store(loaded)
    try:
        return case_history(store, suite, cases[case], target, window)
    finally:
        store.close()


def print_history(
    suite: str, case: str, rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool
) -> None:
    from ragcanary.reports.table import render_history

    if as_json:
        console.print_json(data=list(rows), default=str)
    else:
        console.print(render_history(suite, case, rows))


def stored_runs(
    loaded: LoadedConfig,
    *,
    suite: str | None,
    target: str | None,
    outcome: str | None,
    since: str,
    limit: int,
) -> list[dict[str, Any]]:
    """`ragcanary runs` from the database."""
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC) - timedelta(seconds=_since(since))
    store = _store(loaded)
    try:
        return store.list_runs(suite, target, limit, outcome, start)
    finally:
        store.close()


def export_trec(loaded: LoadedConfig, run_id: str) -> dict[str, str]:
    """`ragcanary export RUN --format trec`: file name -> text, the qrels second."""
    from ragcanary.reports.trec import qrels_file, run_file

    store = _store(loaded)
    try:
        report = store.get_report(run_id)
    finally:
        store.close()
    if report is None:
        raise UsageError(f"run {run_id}: no such run in storage; pick one from `ragcanary runs`")
    suite = loaded.suites.get(str(report["suite"]))
    if suite is None:
        raise UsageError(
            f"run {run_id} is of suite {report['suite']!r}, which the config no longer has; "
            "its labels are needed for the qrels"
        )
    try:
        return {
            f"{run_id}.run": run_file(report),
            f"{report['suite']}.qrels": qrels_file(suite.cases),
        }
    except ValueError as exc:
        raise UsageError(f"cannot export run {run_id}: {exc}") from None


def print_runs(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    from ragcanary.reports.table import render_runs

    if as_json:
        console.print_json(data=list(rows), default=str)
    else:
        console.print(render_runs(rows) if rows else "no run in that window")


def _since(since: str) -> float:
    from ragcanary.config.units import DURATION_HINT, DurationOutOfRange, parse_duration_between

    try:
        return parse_duration_between(since, "since")
    except DurationOutOfRange as exc:
        raise UsageError(f"--since: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"--since: {exc}; {DURATION_HINT}") from None


async def calibrate_noise(
    loaded: LoadedConfig, suite: str, target: str, runs: int, console: Console
) -> None:
    """`ragcanary calibrate`: N runs of the unchanged system and the noise they show."""
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
                labels = (report or {}).get("stale_labels") or []
                if not labels:
                    continue
                console.print(
                    f"{suite} on {target}: {len(labels)} stale labels in the newest stored run:",
                    markup=False,
                    highlight=False,
                )
                unseen = f"no canary got it back in the last {cfg.stale_label_runs} runs"
                for label in labels:
                    why = "left the index" if label.get("reason") == "missing" else unseen
                    line = f"  case {label.get('case')}: {label.get('id')} ({why})"
                    console.print(line, markup=False, highlight=False)
    except StorageError:
        pass
    finally:
        store.close()
