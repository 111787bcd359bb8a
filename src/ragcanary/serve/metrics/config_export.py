"""What the exporter publishes of a loaded config: thresholds, intervals, a hash, the UI's URL."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime

from ragcanary.config.model import Config, SuiteConfig
from ragcanary.serve.metrics.exporter import SuitePairs
from ragcanary.serve.schedule.jobs import interval_seconds
from ragcanary.suites import fingerprint
from ragcanary.suites.judge import settings_for
from ragcanary.suites.loaded import LoadedConfig


def verdict_thresholds(suite: SuiteConfig) -> dict[str, float]:
    """Every limit the suite's verdict and drift checks use, by ``ragcanary_threshold`` name."""
    settings = settings_for(suite)
    policy = settings.policy
    thresholds = {
        "max_drop": policy.max_drop,
        "significance": policy.significance,
        "min_coverage": policy.min_coverage,
        "score_drift": settings.score_drift,
        "embedding_drift": suite.thresholds.embedding_drift,  # an alert's, not the verdict's
        **policy.floors,  # hit_rate@5, mrr, ...
    }
    if policy.min_rank_overlap is not None:  # null turns the check off: no line to cross
        thresholds["min_rank_overlap"] = policy.min_rank_overlap
    return thresholds


def config_hash(loaded: LoadedConfig) -> str:
    """A short hash of the effective configuration and its suites' cases, secrets masked.

    Replicas that run the same configuration export the same ``ragcanary_config_hash``; it is
    the ``config_hash`` of every run's fingerprint too (``suites.fingerprint``).
    """
    return fingerprint.config_hash(loaded)


def ui_base_url(config: Config) -> str | None:
    """The base URL that links to the web pages are built on (``ragcanary_ui_info``).

    ``ui_url`` when set; else ``http://LISTEN`` when ``listen`` names one host, which is where
    the pages are (the demo, a daemon on a fixed address); else None: 0.0.0.0 and :: listen on
    every address, none of which the daemon can tell is the one people reach it at.
    """
    if config.ui_url:
        return config.ui_url
    host, _, port = config.listen.rpartition(":")
    try:
        everywhere = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:  # a host name
        everywhere = False
    return None if everywhere or not host else f"http://{host}:{port}"


def suite_pairs(loaded: LoadedConfig, now: datetime | None = None) -> dict[str, SuitePairs]:
    """What the exporter must know of each configured suite, its thresholds and interval too.

    ``now`` is where a cron schedule's interval is measured from (default: the current time).
    """
    at = now or datetime.now(UTC)
    return {
        name: SuitePairs(
            targets=tuple(cfg.targets),
            ks=tuple(cfg.k),
            per_case_metrics=cfg.per_case_metrics,
            case_ids=tuple(c.id for c in loaded.suites[name].cases),
            thresholds=verdict_thresholds(cfg),
            interval_seconds=interval_seconds(cfg, at),
            slo=cfg.slo.objective_of() if cfg.slo is not None else None,
        )
        for name, cfg in loaded.config.suites.items()
    }
