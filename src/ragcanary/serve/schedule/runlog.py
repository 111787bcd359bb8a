"""A run's log lines: one summary per run, and the reasons when queries failed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from ragcanary.reports.report import config_failure, failure_kinds

log = structlog.get_logger("ragcanary")


def log_run(report: Mapping[str, Any]) -> None:
    """One summary line per run, and a warning with the reasons when queries failed."""
    metrics = report["metrics"]
    key_metrics = {
        m: v for m, v in metrics.items() if m.startswith(("hit_rate@", "ndcg@")) or m == "mrr"
    }
    baseline = report.get("baseline") or {}
    # A config its target's answers do not fit is said once per run, here, with the fix.
    failed = report["outcome"] == "regression" or config_failure(report) is not None
    (log.warning if failed else log.info)(
        "run",
        suite=report["suite"],
        target=report["target"],
        outcome=report["outcome"],
        coverage=report["coverage"],
        duration_s=report["duration_s"],
        run_id=report["run_id"],
        rank_overlap=baseline.get("rank_overlap"),
        score_drift=baseline.get("score_drift"),
        reasons=[f["message"] for f in report.get("failures") or ()] if failed else None,
        **key_metrics,
    )
    kinds = failure_kinds(report)
    if kinds:
        log.warning(
            "queries failed",
            suite=report["suite"],
            target=report["target"],
            reasons={outcome: kind["count"] for outcome, kind in kinds.items()},
            first_errors={outcome: kind["first"] for outcome, kind in kinds.items()},
        )
