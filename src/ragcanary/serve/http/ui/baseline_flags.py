"""The pages' banner for a pinned baseline measured under another config than the one in force."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragcanary.serve.service import Pair, Service


def changed_baselines(service: Service, pair: Pair | None = None) -> dict[Pair, dict[str, Any]]:
    """Each pinned baseline (of ``pair`` only, when given) whose fingerprint differs from the
    config in force: its run id and a line per change (``reports.pinned_config``)."""
    return {
        (row["suite"], row["target"]): {
            "run_id": row["run_id"],
            "changes": [c["text"] for c in row["config_changes"]],
        }
        for row in service.baselines()
        if row.get("config_changes") and (pair is None or (row["suite"], row["target"]) == pair)
    }
