"""A probed run's fingerprint: the config's hashes, its query vectors' length, the index's count."""

from __future__ import annotations

import dataclasses

import structlog

from ragcanary.measure.fingerprint import IndexState
from ragcanary.measure.results import RunResult
from ragcanary.probe.presets import PresetTarget
from ragcanary.probe.retries import QueryFailed
from ragcanary.redact import Redactor
from ragcanary.suites.fingerprint import fingerprint
from ragcanary.suites.loaded import LoadedConfig

log = structlog.get_logger("ragcanary")

# Targets whose index could not say its count this process: each is logged once, not every run.
_UNTOLD: set[str] = set()


async def with_fingerprint(
    loaded: LoadedConfig,
    suite: str,
    target_name: str,
    target: PresetTarget,
    run: RunResult,
    untold: set[str] = _UNTOLD,
) -> RunResult:
    """``run`` with its fingerprint: the hashes of the config, the suite and the target, the
    embedding model, the length of the first query vector it sent, and what the index said
    of itself (``index_state``). An index that cannot say leaves its fields out, logged once
    per target (``untold``: the targets logged already); it never fails the run."""
    dimensions = next((len(r.vector) for r in run.results if r.vector is not None), None)
    state = await _index_state(loaded, target_name, target, untold)
    made = fingerprint(loaded, suite, target_name, dimensions, state)
    return dataclasses.replace(run, fingerprint=made)


async def _index_state(
    loaded: LoadedConfig, name: str, target: PresetTarget, untold: set[str]
) -> IndexState:
    try:
        state = await target.index_state()
    except Exception as exc:  # a lookup that failed, or a bug in one, says nothing of the run
        if name not in untold:
            untold.add(name)
            reason = exc.reason if isinstance(exc, QueryFailed) else f"{type(exc).__name__}: {exc}"
            log.warning(
                "index_count_unavailable",
                target=name,
                reason=Redactor(loaded.secrets)(reason),
                effect="runs of this target have no documents in their fingerprint",
            )
        return IndexState()
    untold.discard(name)  # told again: a later failure is news
    return state
