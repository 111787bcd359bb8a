"""What `ragcanary gate` does: both targets asked the suite in one pass, the candidate's run
judged with the stable run as its baseline, and the gate's files written."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
from rich.console import Console

from ragcanary.cli.common import write_output
from ragcanary.errors import UsageError
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.run_report import build_report
from ragcanary.probe.cycle import judge_probed, open_target, probe_opened
from ragcanary.probe.presets import PresetTarget
from ragcanary.probe.runner import Embed
from ragcanary.probe.target import make_client
from ragcanary.reports.gate import GateResult
from ragcanary.suites.loaded import LoadedConfig, locate


def check_names(loaded: LoadedConfig, suite: str, stable: str, candidate: str) -> None:
    """Refuse a suite or a target the config lacks, naming those it has (exit 2)."""
    if suite not in loaded.config.suites:
        known = ", ".join(loaded.config.suites)
        raise UsageError(
            f"--suite {suite}: no such suite in {loaded.path}; the config has: {known}"
        )
    for option, name in (("--stable", stable), ("--candidate", candidate)):
        if name not in loaded.config.targets:
            known = ", ".join(loaded.config.targets)
            raise UsageError(
                f"{option} {name}: no such target in {loaded.path}; the config has: {known}; "
                f"add the {option[2:]} index under targets: first"
            )


async def gate_targets(loaded: LoadedConfig, suite: str, stable: str, candidate: str) -> GateResult:
    """The suite's canaries asked of both targets at once, each within its own concurrency
    and rate limit; the candidate's run judged with the stable run as its baseline (its index
    asked about the judged ids the stable run found and it lost). A target whose answers fit
    none of its config is named on stderr, located like a config error."""
    async with AsyncExitStack() as stack:

        async def opened(name: str) -> tuple[httpx.AsyncClient, PresetTarget, Embed | None]:
            client = await stack.enter_async_context(make_client(loaded.config.targets[name]))
            return (client, *await open_target(stack, loaded, name, client))

        stable_client, stable_target, stable_embed = await opened(stable)
        client, target, embed = await opened(candidate)
        stable_run, run = await asyncio.gather(
            probe_opened(loaded, suite, stable, stable_target, stable_embed),
            probe_opened(loaded, suite, candidate, target, embed),
        )
        first = await judge_probed(
            loaded, suite, stable, stable_target, stable_client, stable_run, None
        )
        second = await judge_probed(loaded, suite, candidate, target, client, run, stable_run)
    for evaluation in (first, second):
        _print_misread(loaded, evaluation)
    return GateResult(suite, build_report(first), build_report(second))


def _print_misread(loaded: LoadedConfig, evaluation: Evaluation) -> None:
    found = evaluation.misread
    if found is None:
        return
    problem = locate(loaded, ("targets", found.target, found.field), found.message, found.fix)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"ragcanary: {problem}", markup=False)


def write_gate_outputs(
    result: GateResult, report: Path | None, junit: Path | None, markdown: Path | None
) -> None:
    """The files asked for: the gate's JSON, JUnit XML, a Markdown summary."""
    if report:
        from ragcanary.reports.gate import gate_json

        write_output(report, "--report", lambda: gate_json(result))
    if junit:
        from ragcanary.reports.junit import render_junit_many

        # The candidate's canaries as tests; the stable run's too when it could not be asked.
        runs = [result.candidate]
        if result.stable.outcome == "unavailable":
            runs.insert(0, result.stable)
        write_output(junit, "--junit", lambda: render_junit_many(runs))
    if markdown:
        from ragcanary.reports.markdown import render_gate_markdown

        write_output(markdown, "--markdown", lambda: render_gate_markdown(result))
