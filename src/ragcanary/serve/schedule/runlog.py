"""A run's log lines: one summary per run, and the reasons when queries failed."""

from __future__ import annotations

import structlog

from ragcanary.measure.run_report import RunReport
from ragcanary.reports.report import failure_kinds

log = structlog.get_logger("ragcanary")


def log_run(report: RunReport) -> None:
    """One summary line per run, and a warning with the reasons when queries failed."""
    key_metrics = {
        m: v
        for m, v in report.metrics.items()
        if m.startswith(("hit_rate@", "ndcg@")) or m == "mrr"
    }
    baseline = report.baseline
    # A config its target's answers do not fit is said once per run, here, with the fix.
    failed = report.outcome == "regression" or report.config_failure() is not None
    (log.warning if failed else log.info)(
        "run",
        suite=report.suite,
        target=report.target,
        outcome=report.outcome,
        coverage=report.coverage,
        duration_s=report.duration_s,
        run_id=report.run_id,
        rank_overlap=baseline.rank_overlap if baseline else None,
        score_drift=baseline.score_drift if baseline else None,
        reasons=[f.message for f in report.failures] if failed else None,
        **key_metrics,
    )
    kinds = failure_kinds(report)
    if kinds:
        log.warning(
            "queries failed",
            suite=report.suite,
            target=report.target,
            reasons={outcome: kind["count"] for outcome, kind in kinds.items()},
            first_errors={outcome: kind["first"] for outcome, kind in kinds.items()},
        )
