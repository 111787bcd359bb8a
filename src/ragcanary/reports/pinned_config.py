"""Whether a pinned baseline was measured under the config in force: what changed since."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragcanary.measure.fingerprint import config_changes
from ragcanary.measure.run_report import RunReport
from ragcanary.suites.fingerprint import fingerprint
from ragcanary.suites.loaded import LoadedConfig

Pair = tuple[str, str]


def changed_since_pinned(loaded: LoadedConfig, pinned: RunReport) -> list[dict[str, Any]] | None:
    """What of the config changed since ``pinned`` (a pair's baseline) was measured: its
    embedding model, the target's settings, the suite's cases or settings
    (``measure.fingerprint.config_changes``), each ``{field, from, to, text}``; empty when
    nothing did. None when that cannot be told: the run is older than fingerprints, or its
    pair is no longer configured."""
    suite, target = pinned.pair
    configured = loaded.config.suites.get(suite)
    if pinned.fingerprint is None or configured is None or target not in configured.targets:
        return None
    now = fingerprint(loaded, suite, target)
    return [
        {"field": c.field, "from": c.before, "to": c.after, "text": c.text}
        for c in config_changes(pinned.fingerprint, now)
    ]


def flag_baselines(
    loaded: LoadedConfig, rows: Iterable[Mapping[str, Any]], heads: Mapping[str, RunReport]
) -> list[dict[str, Any]]:
    """Each pinned baseline's row (suite, target, run_id, ...) with ``config_changes``: what
    changed since it was measured (``changed_since_pinned``; None when it cannot be told)."""
    flagged = []
    for row in rows:
        head = heads.get(str(row["run_id"]))
        changes = changed_since_pinned(loaded, head) if head is not None else None
        flagged.append({**row, "config_changes": changes})
    return flagged


def changed_pairs(flagged: Iterable[Mapping[str, Any]]) -> dict[Pair, list[str]]:
    """The pairs whose pinned baseline was measured under another config, with what changed."""
    return {
        (row["suite"], row["target"]): [c["text"] for c in row["config_changes"]]
        for row in flagged
        if row.get("config_changes")
    }
