"""One cycle of a suite against a target: probe it, then judge the run against a baseline."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

import httpx

from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.embedding import open_embedder
from ragcanary.probe.endpoints import ask_endpoints
from ragcanary.probe.evidence import index_evidence
from ragcanary.probe.presets import PresetTarget, make_target
from ragcanary.probe.run_fingerprint import with_fingerprint
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
    A target with an ``embedding`` has its queries embedded there first. The index is asked
    about the judged relevant ids that left their top-k (``probe.evidence``), and the target's
    other ``endpoints`` the canaries it answered (``probe.endpoints``), before judging.
    """
    async with AsyncExitStack() as stack:
        target, embed = await open_target(stack, loaded, target_name, client)
        run = await probe_opened(
            loaded, suite_name, target_name, target, embed, on_result, gate, run_id
        )
        return await judge_probed(
            loaded, suite_name, target_name, target, client, run, baseline, gate
        )


async def judge_probed(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    target: PresetTarget,
    client: httpx.AsyncClient,
    run: RunResult,
    baseline: RunResult | None,
    gate: TargetGate | None = None,
) -> Evaluation:
    """``run``, probed on the open ``target``, judged against ``baseline``: the index asked
    about the judged relevant ids that left their top-k, the target's other endpoints asked
    the canaries it answered, then the verdict."""
    evidence = await index_evidence(target, run, baseline)
    endpoints = await ask_endpoints(loaded, suite_name, target_name, run, client, gate=gate)
    return judge_run(loaded, suite_name, target_name, run, baseline, evidence, endpoints)


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
    async with AsyncExitStack() as stack:
        target, embed = await open_target(stack, loaded, target_name, client)
        return await probe_opened(
            loaded, suite_name, target_name, target, embed, on_result, gate, run_id
        )


async def probe_opened(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    target: PresetTarget,
    embed: Embed | None,
    on_result: Callable[[CaseResult], None] | None = None,
    gate: TargetGate | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Every canary of ``suite_name`` asked of the open ``target`` once (``open_target``)."""
    suite_cfg = loaded.config.suites[suite_name]
    target_cfg = loaded.config.targets[target_name]
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
    return await with_fingerprint(loaded, suite_name, target_name, target, run)


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
