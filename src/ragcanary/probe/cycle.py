"""One cycle of a suite against a target: ask the target, evaluate against a baseline, report."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from ragcanary.measure.evaluation import Evaluation, evaluate
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.runner import TargetGate, run_suite
from ragcanary.probe.target import HttpTarget
from ragcanary.redact import Redactor
from ragcanary.suites.loaded import LoadedConfig


async def run_cycle(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    client: httpx.AsyncClient,
    *,
    baseline: RunResult | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    gate: TargetGate | None = None,
) -> Evaluation:
    """Run ``suite_name`` once against ``target_name`` and judge it against ``baseline``.

    Runs that may overlap against one target (the daemon's) pass that target's ``gate``.
    """
    suite_cfg = loaded.config.suites[suite_name]
    target_cfg = loaded.config.targets[target_name]
    target = HttpTarget(target_name, target_cfg, client, redact=Redactor(loaded.secrets))
    run = await run_suite(
        suite_name,
        loaded.suites[suite_name],
        target,
        depth=suite_cfg.depth,
        concurrency=target_cfg.concurrency,
        rate_limit=target_cfg.rate_limit,
        on_result=on_result,
        gate=gate,
    )
    return evaluate(run, suite_cfg, baseline)
