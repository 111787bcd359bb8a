"""Stale labels on the pages: the words for each reason, and the page listing them per pair.

The daemon finds a pair's stale labels with each answered run (``serve.daemon``) and stores
them in the run's report; the pages read them back from the newest answered run of each pair
(a few bytes extracted by the database), so nothing is recomputed per view and every replica
shows the same list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ragcanary.measure.run_report import Absent, IndexLookup, StaleLabelEntry
from ragcanary.serve.http.ui.render import instant

if TYPE_CHECKING:
    from ragcanary.serve.service import Service

LEFT_INDEX = "left the index"


def stale_words(reason: Any, runs: int) -> str:
    """What a stale label's reason means, as every page says it: the index no longer holds
    the id, or no canary got it back for the suite's ``stale_label_runs``."""
    if reason == "missing":
        return LEFT_INDEX
    return f"not returned in the last {runs} runs"


@dataclass(frozen=True)
class Label:
    """One stale label: a case, its relevant id, and why it is stale (in words)."""

    case: str
    id: str
    reason: str  # "missing" or "not_returned"
    words: str
    looked_up_at: datetime | None = None  # missing: when the index said it no longer holds it


@dataclass(frozen=True)
class Lookup:
    """When a run looked the index up (its report's ``index_lookup``)."""

    at: datetime | None  # when the index last answered about every relevant id; None: never
    ids: int  # how many relevant ids the suite has
    left: list[str]  # relevant ids that left their canary's top-k, asked again in the run
    left_at: datetime | None  # when they were asked; None: none left, or it could not tell


def lookup_of(found: IndexLookup | None) -> Lookup | None:
    """The ``index_lookup`` of one run's report; None for a run stored before it was kept."""
    if found is None:
        return None
    return Lookup(instant(found.at), found.ids, list(found.left), instant(found.left_at))


@dataclass(frozen=True)
class PairLabels:
    """The stale labels the newest answered run of a pair found; ``labels`` is None when
    that run could not tell (too few runs yet, no baseline, no index lookup), or none ran."""

    suite: str
    target: str
    runs: int  # the suite's stale_label_runs
    run_id: str | None
    started_at: datetime | None
    labels: list[Label] | None
    lookup: Lookup | None = None


def labels_of(found: tuple[StaleLabelEntry, ...] | Absent | None, runs: int) -> list[Label] | None:
    """The labels of one run's ``stale_labels``; None when the run could not tell."""
    if not isinstance(found, tuple):
        return None
    return [
        Label(s.case, s.id, s.reason, stale_words(s.reason, runs), instant(s.looked_up_at))
        for s in found
    ]


def by_case(labels: Sequence[Label] | None) -> dict[str, dict[str, str]]:
    """Case id -> its stale relevant ids -> the words for why."""
    out: dict[str, dict[str, str]] = {}
    for label in labels or ():
        out.setdefault(label.case, {})[label.id] = label.words
    return out


def looked_up(labels: Sequence[Label] | None) -> dict[str, dict[str, datetime]]:
    """Case id -> its relevant ids that left the index -> when the index said so."""
    out: dict[str, dict[str, datetime]] = {}
    for label in labels or ():
        if label.looked_up_at is not None:
            out.setdefault(label.case, {})[label.id] = label.looked_up_at
    return out


def newest(
    service: Service, pairs: Sequence[tuple[str, str]], runs: Mapping[str, int]
) -> list[PairLabels]:
    """Per pair, the stale labels its newest answered run found (``runs``: each suite's
    stale_label_runs): one small read per pair and one for all their labels."""
    answered = service.newest_runs(pairs, answered=True)
    findings = service.stale_findings([found[0] for found in answered.values()])
    out = []
    for suite, target in pairs:
        found = answered.get((suite, target))
        window = runs.get(suite, 0)
        if found is None:
            out.append(PairLabels(suite, target, window, None, None, None))
            continue
        run_id, started_at, _ = found
        labels, lookup = findings.get(run_id, (None, None))
        out.append(
            PairLabels(
                suite,
                target,
                window,
                run_id,
                started_at,
                labels_of(labels, window),
                lookup_of(lookup),
            )
        )
    return out


def of_case(
    service: Service, suite: str, target: str, case: str, runs: int
) -> tuple[dict[str, str], dict[str, datetime]]:
    """The stale relevant ids of one case on one target (its pair's newest answered run),
    with the words for why, and when the index said it no longer holds those that left it."""
    (pair,) = newest(service, [(suite, target)], {suite: runs})
    return by_case(pair.labels).get(case, {}), looked_up(pair.labels).get(case, {})


def page(service: Service, suite: str | None, target: str | None) -> dict[str, Any]:
    """The stale labels page: every configured pair (or those of ``suite`` / ``target``)."""
    config = service.loaded.config
    pairs = [
        (s, t)
        for s, cfg in config.suites.items()
        for t in cfg.targets
        if (suite is None or s == suite) and (target is None or t == target)
    ]
    runs = {s: cfg.stale_label_runs for s, cfg in config.suites.items()}
    listed = newest(service, pairs, runs)
    # Pairs with labels first, the most first; then those that found none, then the unknown.
    listed.sort(key=lambda p: (p.labels is None, -len(p.labels or ()), p.suite, p.target))
    return {
        "page": "stale",
        "pairs": listed,
        "total": sum(len(p.labels or ()) for p in listed),
        "filtered": suite is not None or target is not None,
        "left_index": LEFT_INDEX,
    }
