"""`validate --live`: one canary sent to each target, to see a config work before a run needs it."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Literal

from ragcanary.config.credentials import without_credentials
from ragcanary.measure.results import Answer
from ragcanary.measure.stale import StaleLabel, relevant_ids, stale_labels
from ragcanary.probe.embedding import open_embedder
from ragcanary.probe.presets import PresetTarget, make_target
from ragcanary.probe.retries import TRANSIENT
from ragcanary.probe.target import make_client
from ragcanary.redact import Redactor
from ragcanary.suites.loaded import LoadedConfig

Verdict = Literal["ok", "config", "unreachable"]


@dataclass(frozen=True)
class LiveCheck:
    """What one target did with one canary: the request sent (secrets masked) and its answer."""

    target: str
    query: str
    request: str
    answer: Answer
    verdict: Verdict
    # Relevant ids of the suites on this target that its index no longer holds; None when
    # the target cannot tell (or did not answer the canary).
    left_index: tuple[StaleLabel, ...] | None = None


def first_query(loaded: LoadedConfig, target: str) -> str | None:
    """The first case's query of the first suite that runs against ``target``."""
    for name, suite in loaded.config.suites.items():
        cases = loaded.suites.get(name)
        if target in suite.targets and cases is not None and cases.cases:
            return cases.cases[0].query
    return None


async def check_target(loaded: LoadedConfig, name: str, query: str) -> LiveCheck:
    """Embed ``query`` if the target needs it, send it once, and judge what came back."""
    config = loaded.config.targets[name]
    redact = Redactor(loaded.secrets)
    depth = max((s.depth for s in loaded.config.suites.values() if name in s.targets), default=10)
    vector: tuple[float, ...] | None = None
    async with AsyncExitStack() as stack:
        if config.embedding is not None:
            endpoint = loaded.config.embeddings[config.embedding]
            embedder = await open_embedder(stack, config.embedding, endpoint, redact)
            (embedded,) = await embedder.embed([query])
            if embedded.vector is None:
                reason = embedded.error or "the query could not be embedded"
                failed = Answer((), (), embedded.latency_s, "embedding_error", reason)
                verdict: Verdict = "unreachable" if embedded.unreachable else "config"
                url = without_credentials(endpoint.url)
                request = f"POST {url} (embedding {config.embedding})"
                return LiveCheck(name, query, redact(request), failed, verdict)
            vector = embedded.vector
        client = await stack.enter_async_context(make_client(config))
        target = make_target(name, config, client, redact)
        stack.push_async_callback(target.aclose)
        answer = await target.search(query, depth, vector)
        request = target.describe_last_request()
        left = await left_the_index(loaded, name, target) if answer.answered else None
    if answer.answered:
        verdict = "ok"
    else:
        verdict = "unreachable" if answer.outcome in TRANSIENT else "config"
    return LiveCheck(name, query, request, answer, verdict, left)


async def left_the_index(
    loaded: LoadedConfig, name: str, target: PresetTarget
) -> tuple[StaleLabel, ...] | None:
    """The (case, id) labels of every suite on target ``name`` whose id its index does not
    hold, in suite and case order; None when the target cannot tell."""
    cases = [
        case
        for suite, config in loaded.config.suites.items()
        if name in config.targets and suite in loaded.suites
        for case in loaded.suites[suite].cases
    ]
    ids = relevant_ids(cases)
    missing = await target.missing(ids) if ids else set()
    if missing is None:
        return None
    return tuple(dict.fromkeys(stale_labels(cases, None, missing)))
