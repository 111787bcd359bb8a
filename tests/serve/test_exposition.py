"""The cached /metrics text: the same samples as the registry, fresh after every change."""

from __future__ import annotations

from collections import Counter

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_exporter import make_report, pairs

from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.serve.metrics.exposition import split_families

Sample = tuple[str, tuple[tuple[str, str], ...], float]


def samples(text: bytes) -> set[Sample]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def two_pairs() -> Exporter:
    """An exporter with pairs core/search and core/other, each after one run."""
    exporter = Exporter(CollectorRegistry())
    exporter.load(pairs("search", "other", per_case=True))
    exporter.observe_run(make_report("regression"))
    exporter.observe_run(make_report("ok", target="other", hit_rate=1.0))
    exporter.count_overlap("core", "other")
    return exporter


def hit_rate_at_5(text: bytes, target: str) -> float | None:
    labels = (("k", "5"), ("suite", "core"), ("target", target))
    found = [v for name, lab, v in samples(text) if name == "ragcanary_hit_rate" and lab == labels]
    return found[0] if found else None


def test_exposition_holds_exactly_the_samples_of_the_registry() -> None:
    exporter = two_pairs()
    assert samples(exporter.exposition()) == samples(generate_latest(exporter.registry))


def test_exposition_has_one_help_and_one_type_line_per_family() -> None:
    meta = [line for line in two_pairs().exposition().decode().splitlines() if line[:1] == "#"]
    assert [line for line, n in Counter(meta).items() if n > 1] == []


def test_a_run_after_a_scrape_shows_in_the_next_scrape() -> None:
    exporter = two_pairs()
    assert hit_rate_at_5(exporter.exposition(), "search") == 0.5
    exporter.observe_run(make_report("ok", hit_rate=0.25))
    text = exporter.exposition()
    assert hit_rate_at_5(text, "search") == 0.25
    assert hit_rate_at_5(text, "other") == 1.0


def test_a_reload_that_drops_a_target_removes_its_series_from_the_next_scrape() -> None:
    exporter = two_pairs()
    exporter.exposition()
    exporter.load(pairs("search", ks=(1,)))
    text = exporter.exposition()
    assert 'target="other"' not in text.decode()
    assert hit_rate_at_5(text, "search") is None  # k = 5 left the configuration
    assert samples(text) == samples(generate_latest(exporter.registry))


def test_split_families_gives_each_family_its_header_and_samples_in_order() -> None:
    registry = CollectorRegistry()
    first = Gauge(
        "first", "First, with a label value that holds a newline.", ["x"], registry=registry
    )
    first.labels("a\n# HELP fake").set(1)
    first.labels("b").set(2)
    Gauge("second", "Second.", registry=registry).set(3)
    text = generate_latest(registry)
    families = split_families(text)
    assert [header.split()[2] for header, _ in families] == [b"first", b"second"]
    assert [body.count(b"\n") for _, body in families] == [2, 1]
    assert b"".join(header + body for header, body in families) == text
