"""Asking a target's other endpoints (``endpoints:``) the canaries its url answered.

Replicas, shards or regions behind one target should answer a query alike; one that fell
behind on a reindex, or serves another index version, answers some canaries otherwise, and a
canary run that only ever reaches the url never sees it. After the run, each endpoint is asked
every canary the url answered, once: a copy of the target whose url is the endpoint's, on the
target's own client and within its concurrency and rate limit (the ``TargetGate`` all of them
share). A target searching by vector sends the vectors of the run, so that the endpoints are
compared on the same query vector and the embedding endpoint is not asked again.
``measure.endpoints`` compares the answers; nothing an endpoint does (refusals, timeouts,
garbage) raises or changes the run's verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from ragcanary.config.credentials import without_credentials
from ragcanary.measure.cases import Suite
from ragcanary.measure.endpoints import EndpointRun
from ragcanary.measure.results import RunResult
from ragcanary.probe.embedding import Embedded
from ragcanary.probe.presets import make_target
from ragcanary.probe.runner import Embed, TargetGate, run_suite
from ragcanary.redact import Redactor
from ragcanary.suites.loaded import LoadedConfig


async def ask_endpoints(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    run: RunResult,
    client: httpx.AsyncClient,
    *,
    gate: TargetGate | None = None,
) -> tuple[EndpointRun, ...]:
    """Each of ``target_name``'s endpoints, in config order, asked the canaries ``run``
    answered; none when the target lists no endpoints. Runs that may overlap against the
    target (the daemon's) pass its ``gate``; without one, the endpoints share a new one."""
    config = loaded.config.targets[target_name]
    if not config.endpoints:
        return ()
    answered = tuple(r for r in run.results if r.answer.answered)
    suite = Suite(tuple(r.case for r in answered))
    vectors = {r.case.query: r.vector for r in answered if r.vector is not None}
    embed = _remembered(vectors) if config.embedding is not None else None
    gate = gate or TargetGate(config.concurrency, config.rate_limit)
    redact = Redactor(loaded.secrets)
    asked = []
    for name, url in config.endpoints.items():
        target = make_target(target_name, config.model_copy(update={"url": url}), client, redact)
        try:
            endpoint_run = await run_suite(
                suite_name,
                suite,
                target,
                depth=loaded.config.suites[suite_name].depth,
                concurrency=config.concurrency,
                rate_limit=config.rate_limit,
                gate=gate,
                embed=embed,
            )
        finally:
            await target.aclose()
        asked.append(EndpointRun(name, redact(without_credentials(url)), endpoint_run))
    return tuple(asked)


def _remembered(vectors: dict[str, tuple[float, ...]]) -> Embed:
    """An ``embed`` that gives each query the vector the run sent for it."""

    async def embed(queries: Sequence[str]) -> list[Embedded]:
        return [
            Embedded(vectors.get(query), 0.0, None if query in vectors else "no vector in the run")
            for query in queries
        ]

    return embed
