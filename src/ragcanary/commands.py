"""What each CLI command does, between parsing its arguments and printing its result."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragcanary.config import LoadedConfig
from ragcanary.cycle import run_cycle
from ragcanary.errors import UsageError
from ragcanary.evaluation import Evaluation
from ragcanary.report import run_from_report, to_report
from ragcanary.results import CaseResult, RunResult
from ragcanary.table import render_report
from ragcanary.target import make_client


@contextmanager
def _progress(console: Console, label: str, total: int) -> Iterator[Callable[[CaseResult], None]]:
    """A progress bar on a terminal; silence elsewhere (CI logs stay clean)."""
    if not console.is_terminal:
        yield lambda _result: None
        return
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
    failed = {
        o: n for o, n in report["counts"]["outcomes"].items() if n and o not in ("ok", "empty")
    }
    if not failed:
        return None
    reasons = ", ".join(f"{o}={n}" for o, n in failed.items())
    return f"warning: {report['suite']} → {report['target']}: unanswered queries ({reasons})"


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
    from ragcanary.bootstrap import draft_suite, read_queries
    from ragcanary.redact import Redactor
    from ragcanary.target import HttpTarget

    texts = read_queries(queries)
    cfg = loaded.config.targets[target]
    async with make_client(cfg) as client:
        http = HttpTarget(target, cfg, client, redact=Redactor(loaded.secrets))
        return await draft_suite(http, texts, depth, concurrency=cfg.concurrency)


def import_collection(kind: str, paths: Sequence[Path], out: Path, split: str = "test") -> str:
    """`ragcanary import beir|trec`: write a suite file and say what was written."""
    from ragcanary.importers import read_beir, read_trec
    from ragcanary.suite import dump_suite

    imported = read_beir(paths[0], split) if kind == "beir" else read_trec(paths[0], paths[1])
    dump_suite(imported.cases, out)
    skipped = (
        f"; skipped {imported.skipped} queries without relevant documents"
        if imported.skipped
        else ""
    )
    return f"wrote {len(imported.cases)} cases to {out}{skipped}"


def run_demo(mode: str, port: int, workdir: Path, console: Console) -> int:
    """`ragcanary demo`: the bundled retriever, the demo suite, one cycle, the table."""
    import asyncio

    from ragcanary.config import load_config
    from ragcanary.demo.retriever import MODES, BackgroundServer

    if mode not in MODES:
        raise UsageError(f"--drift {mode}: unknown mode; use one of {', '.join(MODES)}")
    path = write_demo_config(workdir, port)
    loaded = load_config(path, {})
    console.print(f"demo retriever on http://127.0.0.1:{port} (mode {mode}); config {path}")
    with BackgroundServer(port=port, mode=mode):
        reports = asyncio.run(run_once(loaded, [("demo", "demo-bm25")], [], console))
    outcome = reports[0]["outcome"]
    return {"ok": 0, "regression": 1, "unavailable": 3}[outcome]


DEMO_CONFIG = """\
# Written by `ragcanary demo`: the bundled BM25 retriever and its hand-labelled suite.
storage: sqlite:///{workdir}/ragcanary.db
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
    every: 10s
    k: [1, 3, 5, 10]
    depth: 10
    thresholds:
      hit_rate: {{5: 0.6}}
      max_drop: 0.02
"""


def write_demo_config(workdir: Path, port: int) -> Path:
    """Write the demo's config and a copy of its suite into ``workdir``; return the config path."""
    from importlib.resources import files

    workdir.mkdir(parents=True, exist_ok=True)
    suite = files("ragcanary.demo").joinpath("suite.yaml").read_text(encoding="utf-8")
    (workdir / "suite.yaml").write_text(suite, encoding="utf-8")
    path = workdir / "ragcanary.yaml"
    path.write_text(DEMO_CONFIG.format(port=port, workdir=workdir.resolve()), encoding="utf-8")
    return path
