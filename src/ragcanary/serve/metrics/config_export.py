"""What the exporter publishes of a loaded config: thresholds, intervals, a hash, the UI's URL."""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import statistics
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.cron import CronTrigger

from ragcanary.config.model import Config, SuiteConfig
from ragcanary.probe.cycle import settings_for
from ragcanary.redact import Redactor
from ragcanary.serve.metrics.exporter import SuitePairs
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


# Fire times a cron schedule's interval is the median gap of: a day of */5, a month of daily.
CRON_SAMPLES = 31


def interval_seconds(suite: SuiteConfig, now: datetime) -> float:
    """Seconds between two runs of the suite; for cron, the median gap of its next fire times.

    The median, not the mean, so that "weekdays at 9" reads as a day, not a day and a half.
    """
    if not suite.cron:
        return suite.every or 300.0
    trigger = CronTrigger.from_crontab(suite.cron, timezone=UTC)  # no jitter: the plan itself
    times: list[datetime] = []
    previous: datetime | None = None
    at: datetime | None = now
    while at is not None and len(times) < CRON_SAMPLES + 1:
        at = trigger.get_next_fire_time(previous, at)
        if at is not None:
            times.append(at)
            previous, at = at, at + timedelta(microseconds=1)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else 300.0


def config_hash(loaded: LoadedConfig) -> str:
    """A short hash of the effective configuration and its suites' cases, secrets masked.

    Replicas that run the same configuration export the same ``ragcanary_config_hash``;
    secrets are masked first so that the hash cannot be used to guess them.
    """
    effective = {
        "config": loaded.config.model_dump(mode="json"),
        "cases": {name: repr(suite.cases) for name, suite in sorted(loaded.suites.items())},
    }
    text = Redactor(loaded.secrets)(json.dumps(effective, sort_keys=True, default=str))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


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
        )
        for name, cfg in loaded.config.suites.items()
    }
