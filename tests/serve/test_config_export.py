"""What the exporter learns of a config: the verdict's thresholds, the interval, a config hash."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from ragcanary.config.model import Config, SuiteConfig
from ragcanary.serve.daemon import suite_pairs
from ragcanary.serve.metrics.config_export import config_hash, ui_base_url, verdict_thresholds
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs
from ragcanary.serve.schedule.jobs import interval_seconds
from ragcanary.suites.loaded import LoadedConfig, load_config

NOW = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)  # a Monday
CONFIG = """\
targets:
  search:
    url: http://127.0.0.1:9/search
    headers: {{Authorization: "Bearer ${{SEARCH_TOKEN}}"}}
    body: {{q: "{{query}}"}}
suites:
  core:
    cases: core.yaml
    targets: [search]
    {schedule}
    k: [1, 5]
    min_coverage: 0.8
    thresholds: {{hit_rate: {{5: 0.75}}, mrr: 0.5, max_drop: 0.05, min_rank_overlap: 0.6}}
"""


def loaded(
    tmp_path: Path, schedule: str = "every: 1m", token: str = "s3cret-token"
) -> LoadedConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "core.yaml").write_text(
        "cases:\n  - {id: c1, query: reset password, relevant: [doc-7]}\n", encoding="utf-8"
    )
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(schedule=schedule), encoding="utf-8")
    return load_config(path, {"SEARCH_TOKEN": token})


def suite(**fields: object) -> SuiteConfig:
    return SuiteConfig.model_validate({"cases": "core.yaml", "targets": ["search"], **fields})


def test_thresholds_are_every_limit_of_the_verdict_with_floors_by_metric_name(
    tmp_path: Path,
) -> None:
    config = loaded(tmp_path).config.suites["core"]
    assert verdict_thresholds(config) == {
        "max_drop": 0.05,
        "significance": 0.05,
        "min_coverage": 0.8,
        "score_drift": 0.03,
        "embedding_drift": 0.01,
        "min_rank_overlap": 0.6,
        "hit_rate@5": 0.75,
        "mrr": 0.5,
    }


def test_a_rank_overlap_check_turned_off_exports_no_threshold() -> None:
    assert "min_rank_overlap" not in verdict_thresholds(
        suite(thresholds={"min_rank_overlap": None})
    )


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ({"every": "90s"}, 90.0),
        ({}, 300.0),  # the default schedule
        ({"cron": "*/5 * * * *"}, 300.0),
        ({"cron": "0 * * * *"}, 3600.0),
        ({"cron": "0 9 * * 1-5"}, 86400.0),  # weekdays: the weekend gap is not the typical one
        ({"cron": "0 3 1 * *"}, 31 * 86400.0),  # monthly: the median month from March
    ],
)
def test_interval_is_every_or_the_median_gap_of_the_cron_schedule(
    schedule: dict[str, str], seconds: float
) -> None:
    assert interval_seconds(suite(**schedule), NOW) == pytest.approx(seconds, abs=86400 * 0.6)
    if "cron" not in schedule or "* * *" in schedule["cron"]:
        assert interval_seconds(suite(**schedule), NOW) == seconds


def test_the_config_hash_is_short_stable_and_changes_with_the_config(tmp_path: Path) -> None:
    first = config_hash(loaded(tmp_path / "a"))
    assert len(first) == 12
    assert first == config_hash(loaded(tmp_path / "b"))  # same content elsewhere: same hash
    assert first != config_hash(loaded(tmp_path / "c", schedule="every: 2m"))


def test_the_config_hash_leaves_secrets_out(tmp_path: Path) -> None:
    """Rotating a token does not make replicas disagree, and the hash reveals nothing of it."""
    assert config_hash(loaded(tmp_path / "a", token="token-one-1234")) == config_hash(
        loaded(tmp_path / "b", token="token-two-5678")
    )


def test_suite_pairs_carry_thresholds_and_interval_to_the_exporter(tmp_path: Path) -> None:
    config = loaded(tmp_path, schedule='cron: "0 * * * *"')
    exporter = Exporter(CollectorRegistry())
    exporter.load(suite_pairs(config, NOW), config_hash=config_hash(config))
    labels = {"suite": "core", "target": "search"}
    sample = exporter.registry.get_sample_value
    assert sample("ragcanary_interval_seconds", labels) == 3600.0
    assert sample("ragcanary_threshold", {**labels, "name": "max_drop"}) == 0.05
    assert sample("ragcanary_threshold", {**labels, "name": "hit_rate@5"}) == 0.75
    assert sample("ragcanary_config_hash", {"hash": config_hash(config)}) == 1.0


def pairs(interval: float | None = 60.0, **thresholds: float) -> dict[str, SuitePairs]:
    limits = {"max_drop": 0.02, "min_rank_overlap": 0.7, **thresholds}
    return {"core": SuitePairs(("search",), (5,), thresholds=limits, interval_seconds=interval)}


def test_a_reload_removes_thresholds_and_the_interval_the_config_dropped() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(**{"hit_rate@5": 0.8}), config_hash="aaaa")
    exporter.load({"core": SuitePairs(("search",), (5,), thresholds={"max_drop": 0.1})})
    text = exporter.exposition().decode()
    assert 'ragcanary_threshold{name="max_drop",suite="core",target="search"} 0.1' in text
    assert "hit_rate@5" not in text
    assert "min_rank_overlap" not in text
    assert "ragcanary_interval_seconds{" not in text
    assert 'ragcanary_config_hash{hash="aaaa"} 1.0' in text  # a load without a hash keeps it


def test_a_reload_replaces_the_config_hash_and_removed_suites_lose_their_settings() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(), config_hash="aaaa")
    exporter.load({}, config_hash="bbbb")
    text = exporter.exposition().decode()
    assert 'ragcanary_config_hash{hash="bbbb"} 1.0' in text
    assert "aaaa" not in text
    assert "ragcanary_threshold{" not in text
    assert "ragcanary_interval_seconds{" not in text


@pytest.mark.parametrize(
    ("listen", "ui_url", "base"),
    [
        ("127.0.0.1:9464", None, "http://127.0.0.1:9464"),
        ("canary.internal:9464", None, "http://canary.internal:9464"),
        ("[::1]:9464", None, "http://[::1]:9464"),
        ("0.0.0.0:9464", None, None),  # every address: none of them is known to be reachable
        ("[::]:9464", None, None),
        ("0.0.0.0:9464", "https://canary.example.com/rc", "https://canary.example.com/rc"),
        ("127.0.0.1:9464", "https://canary.example.com", "https://canary.example.com"),
    ],
)
def test_links_are_built_on_ui_url_else_on_a_concrete_listen_address(
    listen: str, ui_url: str | None, base: str | None
) -> None:
    assert ui_base_url(Config(listen=listen, ui_url=ui_url)) == base


def test_ui_info_shows_the_base_url_and_a_new_one_replaces_it() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(), ui_url="https://one.example.com")
    exporter.load(pairs(), ui_url="https://two.example.com")
    text = exporter.exposition().decode()
    assert 'ragcanary_ui_info{url="https://two.example.com"} 1.0' in text
    assert "one.example.com" not in text


def test_no_base_url_exports_no_ui_info_series() -> None:
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs(), ui_url="https://one.example.com")
    exporter.load(pairs())
    assert "ragcanary_ui_info{" not in exporter.exposition().decode()
    assert exporter.registry.get_sample_value("ragcanary_ui_info", {"url": ""}) is None
