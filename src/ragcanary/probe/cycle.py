"""One cycle of a suite against a target: probe it, then judge the run against a baseline."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

import httpx

from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.embedding import open_embedder
from ragcanary.probe.presets import PresetTarget, make_target
from ragcanary.probe.runner import Embed, TargetGate, run_suite
from ragcanary.redact import Redactor
from ragcanary.suites.judge import judge_run
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
    run_id: str | None = None,
) -> Evaluation:
    """Run ``suite_name`` once against ``target_name`` and judge it against ``baseline``.

    Runs that may overlap against one target (the daemon's) pass that target's ``gate``.
    A target with an ``embedding`` has its queries embedded there first.
    """
    run = await probe_cycle(
        loaded, suite_name, target_name, client, on_result=on_result, gate=gate, run_id=run_id
    )
    return judge_run(loaded, suite_name, target_name, run, baseline)


async def probe_cycle(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    client: httpx.AsyncClient,
    *,
    on_result: Callable[[CaseResult], None] | None = None,
    gate: TargetGate | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Ask ``target_name`` every canary of ``suite_name`` once: the run, not judged yet."""
    suite_cfg = loaded.config.suites[suite_name]
    target_cfg = loaded.config.targets[target_name]
    async with AsyncExitStack() as stack:
        target, embed = await open_target(stack, loaded, target_name, client)
        run = await run_suite(
            suite_name,
            loaded.suites[suite_name],
            target,
            depth=suite_cfg.depth,
            concurrency=target_cfg.concurrency,
            rate_limit=target_cfg.rate_limit,
            on_result=on_result,
            gate=gate,
            run_id=run_id,
            embed=embed,
        )
    return run


async def open_target(
    stack: AsyncExitStack, loaded: LoadedConfig, name: str, client: httpx.AsyncClient
) -> tuple[PresetTarget, Embed | None]:
    """Target ``name`` of ``loaded`` on ``client``, and its query embedder when it has one;
    both closed with ``stack``."""
    config = loaded.config.targets[name]
    redact = Redactor(loaded.secrets)
    target = make_target(name, config, client, redact)
    stack.push_async_callback(target.aclose)  # a SQL target's connections
    if config.embedding is None:
        return target, None
    endpoint = loaded.config.embeddings[config.embedding]
    embedder = await open_embedder(stack, config.embedding, endpoint, redact)
    return target, embedder.embed
