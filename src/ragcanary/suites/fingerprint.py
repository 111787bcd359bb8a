"""The hashes a run's fingerprint holds, from the loaded config (docs/report.md, "fingerprint").

Each hash is the first 12 hex digits of the SHA-256 of canonical JSON (sorted keys) of the
config *after* ``${VAR}`` expansion, with every secret value (``${VAR}`` values, header
values, tokens, URL passwords) replaced by ``***`` first: a hash changes when a setting
does, never when only a secret does, and it cannot be used to guess one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ragcanary.measure.fingerprint import Fingerprint, IndexState
from ragcanary.redact import Redactor
from ragcanary.suites.loaded import LoadedConfig

HASH_DIGITS = 12


def _hash(loaded: LoadedConfig, value: Any) -> str:
    text = Redactor(loaded.secrets)(json.dumps(value, sort_keys=True, default=str))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_DIGITS]


# The last config hashed and its hash: every run of a daemon hashes the same loaded config
# (thousands of cases), until a reload brings another. Held, so its id is never reused.
_last: tuple[LoadedConfig, str] | None = None


def config_hash(loaded: LoadedConfig) -> str:
    """The whole effective configuration and every suite's cases (``ragcanary_config_hash``):
    replicas that run the same configuration have the same one."""
    global _last
    last = _last
    if last is not None and last[0] is loaded:
        return last[1]
    found = _hash(
        loaded,
        {
            "config": loaded.config.model_dump(mode="json"),
            "cases": {name: repr(suite.cases) for name, suite in sorted(loaded.suites.items())},
        },
    )
    _last = (loaded, found)
    return found


def suite_hash(loaded: LoadedConfig, suite: str) -> str:
    """One suite's settings (k, thresholds, schedule, ...) and its cases with their labels."""
    return _hash(
        loaded,
        {
            "config": loaded.config.suites[suite].model_dump(mode="json"),
            "cases": repr(loaded.suites[suite].cases),
        },
    )


def target_hash(loaded: LoadedConfig, target: str) -> str:
    """One target's own section of the config (its url, preset, collection, request, ...)."""
    return _hash(loaded, loaded.config.targets[target].model_dump(mode="json"))


def embedding_model(loaded: LoadedConfig, target: str) -> str | None:
    """The model the target's ``embedding:`` endpoint names (secrets masked), or None."""
    endpoint = loaded.config.targets[target].embedding
    if endpoint is None:
        return None
    return Redactor(loaded.secrets)(loaded.config.embeddings[endpoint].model)


def fingerprint(
    loaded: LoadedConfig,
    suite: str,
    target: str,
    dimensions: int | None = None,
    index: IndexState | None = None,
) -> Fingerprint:
    """The fingerprint of a run of ``suite`` on ``target`` under ``loaded``; ``dimensions``:
    the length of its query vectors, ``index``: what the index said of itself. Without
    them, what the config alone decides (what a pinned baseline is checked against)."""
    state = index or IndexState()
    return Fingerprint(
        config_hash=config_hash(loaded),
        suite_hash=suite_hash(loaded, suite),
        target_hash=target_hash(loaded, target),
        embedding_model=embedding_model(loaded, target),
        embedding_dimensions=dimensions,
        documents=state.documents,
        index_settings=state.settings,
    )
