"""A suite's config as the plain settings measure takes, and a run judged with them."""

from __future__ import annotations

from collections.abc import Sequence

from ragcanary.config.model import SuiteConfig
from ragcanary.config.target import TargetConfig
from ragcanary.measure.endpoints import EndpointRun
from ragcanary.measure.evaluation import Evaluation, evaluate
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.settings import Settings
from ragcanary.measure.verdict import Policy
from ragcanary.suites.loaded import LoadedConfig


def settings_for(suite: SuiteConfig, target: TargetConfig | None = None) -> Settings:
    """The suite's config (and the target's score direction) as the plain values measure takes."""
    t = suite.thresholds
    policy = Policy(
        floors=t.floors(),
        max_drop=t.max_drop,
        significance=t.significance,
        min_rank_overlap=t.min_rank_overlap,
        min_coverage=suite.min_coverage,
        lost_documents=t.lost_documents,
    )
    order = target.score_order if target is not None else "desc"
    return Settings(
        suite.k, suite.depth, suite.gain, t.score_drift, policy, order, t.embedding_drift
    )


def judge_run(
    loaded: LoadedConfig,
    suite_name: str,
    target_name: str,
    run: RunResult,
    baseline: RunResult | None,
    evidence: IndexEvidence | None = None,
    endpoints: Sequence[EndpointRun] = (),
) -> Evaluation:
    """``run`` judged against ``baseline`` with its suite's and target's settings; the
    target's ``endpoints`` compared with it.

    Pure CPU work, tens of milliseconds for hundreds of canaries: the daemon calls it in a
    worker thread, so that its event loop stays free for the other runs and for scrapes.
    """
    suite_cfg = loaded.config.suites[suite_name]
    target_cfg = loaded.config.targets[target_name]
    return evaluate(run, settings_for(suite_cfg, target_cfg), baseline, evidence, endpoints)
