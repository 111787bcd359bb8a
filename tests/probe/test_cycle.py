"""The cycle hands measure the suite's config as plain settings, every field carried over."""

from __future__ import annotations

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.verdict import Policy
from ragcanary.suites.judge import settings_for


def test_settings_carry_every_value_the_verdict_and_drift_use() -> None:
    suite = SuiteConfig.model_validate(
        {
            "cases": "suite.yaml",
            "targets": ["t"],
            "k": [1, 3],
            "depth": 7,
            "gain": "exponential",
            "min_coverage": 0.8,
            "thresholds": {
                "hit_rate": {3: 0.6},
                "mrr": 0.5,
                "max_drop": 0.04,
                "significance": 0.01,
                "min_rank_overlap": None,
                "score_drift": 0.07,
            },
        }
    )
    settings = settings_for(suite)
    assert (list(settings.ks), settings.depth, settings.gain) == ([1, 3], 7, "exponential")
    assert settings.score_drift == 0.07
    assert settings.policy == Policy(
        floors={"hit_rate@3": 0.6, "mrr": 0.5},
        max_drop=0.04,
        significance=0.01,
        min_rank_overlap=None,
        min_coverage=0.8,
    )
