"""The alert rules file and the alert names it must hold (docs/alerts.md describes each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ALERTS = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "alerts.yml"
# RagCanaryDown and
# RagCanaryQualitySlide come from issue 12 (one alert for a stopped daemon, a ticket tier).
CONTRACT = {
    "RagCanaryRegression",
    "RagCanaryQualitySlide",
    "RagCanaryDown",
    "RagCanaryStorageDown",
    "RagCanaryConfigMismatch",
    "RagCanaryHitRateDrop",
    "RagCanaryScoreDrift",
    "RagCanaryEmbeddingDrift",
    "RagCanaryStaleLabels",
    "RagCanaryIndexLost",  # issue 36: the index no longer holds judged documents
    "RagCanaryRankChurn",
    "RagCanaryNegativeLeak",
    "RagCanaryTargetUnavailable",
    "RagCanaryAnswersUnreadable",  # issue 34: a config that fits no answer is no outage
    "RagCanaryStale",
    "RagCanarySlowQueries",
    "RagCanaryConfigReloadFailed",
}

# The alerts `ragcanary rules` generates for the suites' SLOs (deploy/prometheus/slo.yml,
# docs/slo.md), with runbooks like the others.
SLO_ALERTS = {"RagCanarySLOBurnFast", "RagCanarySLOBurnSlow"}


def alert_rules() -> list[dict[str, Any]]:
    """Every alerting rule of ALERTS, in file order (recording rules left out)."""
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]
