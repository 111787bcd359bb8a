"""The /metrics text kept per (suite, target) pair, so a scrape re-renders only what changed.

A daemon watching 200 pairs exports about 20,000 series, and rendering them all takes
prometheus_client longer than a scrape should (see docs/performance.md). Each pair's series
live in their own registry whose text is cached until one of them changes; a scrape joins
the cached texts family by family, which the text format requires (one HELP and TYPE per
family, all its samples after them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

Family = tuple[bytes, bytes]  # the HELP and TYPE lines of a family, and its sample lines


class PairSeries:
    """One pair's copy of every per-pair metric, in its own registry, and its cached text."""

    def __init__(
        self, factories: Mapping[MetricWrapperBase, Callable[[CollectorRegistry], Any]]
    ) -> None:
        self.registry = CollectorRegistry()
        # template -> this pair's metric of the same name, labels and buckets
        self.metrics: dict[MetricWrapperBase, MetricWrapperBase] = {
            template: make(self.registry) for template, make in factories.items()
        }
        self._families: list[Family] | None = None

    def changed(self) -> None:
        """Forget the cached text; call before any series of the pair is set or removed."""
        self._families = None

    def families(self) -> list[Family]:
        """This pair's text split into families, rendered again only after a change."""
        if self._families is None:
            self._families = split_families(generate_latest(self.registry))
        return self._families


def split_families(text: bytes) -> list[Family]:
    """``generate_latest`` output as (HELP and TYPE lines, sample lines) per family, in order.

    Label values and help texts are escaped (a newline is written as ``\\n``), so a line
    that starts with ``# HELP`` always opens a family, wherever else the words appear.
    """
    starts = [0] if text.startswith(b"# HELP ") else []
    at = text.find(b"\n# HELP ")
    while at >= 0:
        starts.append(at + 1)
        at = text.find(b"\n# HELP ", at + 1)
    families = []
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        chunk = text[begin:end]
        header_end = chunk.index(b"\n", chunk.index(b"\n# TYPE ") + 1) + 1
        families.append((chunk[:header_end], chunk[header_end:]))
    return families


def join_text(base: bytes, pairs: Collection[PairSeries]) -> bytes:
    """The whole exposition: ``base`` and then every family with the samples of all pairs.

    Every pair registers the same metrics in the same order, but a family without samples
    renders nothing (the SLO counters of a pair without an SLO), so families are matched by
    their HELP and TYPE lines, in the order they first appear.
    """
    joined: dict[bytes, list[bytes]] = {}
    for series in pairs:
        for header, samples in series.families():
            joined.setdefault(header, []).append(samples)
    parts = [base]
    for header, samples_of_pairs in joined.items():
        parts.append(header)
        parts.extend(samples_of_pairs)
    return b"".join(parts)


class MergedCollector(Collector):
    """All pairs' families merged into one each, after ``base``: what a single registry holds.

    For ``generate_latest`` and ``get_sample_value`` on the exporter's registry; the daemon's
    /metrics uses the cached text instead.
    """

    def __init__(
        self, base: CollectorRegistry, pairs: Mapping[tuple[str, str], PairSeries]
    ) -> None:
        self._base = base
        self._pairs = pairs

    def collect(self) -> Iterator[Metric]:
        yield from self._base.collect()
        merged: dict[str, Metric] = {}
        for series in self._pairs.values():
            for metric in series.registry.collect():
                into = merged.get(metric.name)
                if into is None:
                    into = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                    merged[metric.name] = into
                into.samples.extend(metric.samples)
        yield from merged.values()
