"""Calibration: how much every signal moves when nothing changed, and thresholds to match."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev

from ragcanary.measure.drift import align_run, compare_runs
from ragcanary.measure.metrics import aggregate_name, is_judged_share
from ragcanary.measure.power import Canary
from ragcanary.measure.results import RunResult
from ragcanary.measure.scoring import RunScores, score_run
from ragcanary.measure.settings import Settings


@dataclass(frozen=True)
class Spread:
    """Summary of one signal over the calibration runs."""

    mean: float
    std: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(fmean(values), pstdev(values), min(values), max(values))


@dataclass(frozen=True)
class Noise:
    runs: int
    metrics: dict[str, Spread]
    rank_overlap: Spread | None  # RBO of each later run against the first
    score_delta: Spread | None  # |score delta| of every (case, id) pair against the first run
    top_score_delta: Spread | None
    coverage: Spread
    suggested: dict[str, float]


def _up(value: float, step: float) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 6)


def _down(value: float, step: float) -> float:
    return round(math.floor(value / step + 1e-9) * step, 6)


def measure_noise(runs: Sequence[RunResult], settings: Settings) -> Noise:
    """How much every signal moves when nothing changed, and thresholds that would not cry wolf.

    Suggestions: ``max_drop`` three standard deviations of the noisiest aggregate, or the widest
    range an aggregate spanned when that is larger (at least 0.01); ``score_drift`` one and a
    half times the largest score change seen (at least 0.01); ``min_rank_overlap`` 0.1 under the
    lowest overlap seen.
    """
    if not runs:
        raise ValueError("calibration needs at least one run")
    scored = [
        score_run(r, settings.ks, settings.depth, settings.gain, settings.score_order) for r in runs
    ]
    names = sorted({m for s in scored for m in s.metrics})
    metrics = {
        m: spread
        for m in names
        if (spread := Spread.of([s.metrics[m] for s in scored if m in s.metrics])) is not None
    }
    rbos: list[float] = []
    deltas: list[float] = []
    tops: list[float] = []
    for later in runs[1:]:
        drift = compare_runs(later, runs[0], settings.depth, settings.score_drift)
        rbos.extend(c.rbo for c in drift.per_case.values())
        deltas.extend(abs(d) for c in drift.per_case.values() for d in c.score_deltas.values())
        tops.extend(abs(c.top1_delta) for c in drift.per_case.values() if c.top1_delta is not None)
    coverage = Spread.of([r.coverage for r in runs])
    assert coverage is not None
    suggested = {
        # With more than four runs 3 std can be less than the range (one outlying run): a
        # threshold the unchanged system already crosses would page on its own noise.
        # Judged@k never fails a run by dropping, so its spread says nothing of max_drop.
        "max_drop": _up(
            max(
                [
                    max(3 * s.std, s.high - s.low)
                    for name, s in metrics.items()
                    if not is_judged_share(name)
                ]
                + [0.01]
            ),
            0.01,
        ),
        "score_drift": _up(max([1.5 * d for d in deltas] + [0.01]), 0.01),
        "min_rank_overlap": max(0.0, _down(min(rbos, default=1.0) - 0.1, 0.05)),
    }
    return Noise(
        runs=len(runs),
        metrics=metrics,
        rank_overlap=Spread.of(rbos),
        score_delta=Spread.of(deltas),
        top_score_delta=Spread.of(tops),
        coverage=coverage,
        suggested=suggested,
    )


@dataclass(frozen=True)
class Canaries:
    """The calibration runs as the power model reads them (``power.detectable``).

    ``exact`` when no result kept in two runs changed its score: a deterministic target.
    """

    canaries: tuple[Canary, ...]
    exact: bool


def power_canaries(runs: Sequence[RunResult], settings: Settings) -> Canaries:
    """Every canary labelled and answered in all runs: its value of each metric in each run,
    and in each run once aligned to each other run as the verdict's second opinion aligns a
    run to its baseline (``evaluation.evaluate``)."""
    if len(runs) < 2:
        raise ValueError("the power of the verdict needs at least two calibration runs")
    ks, depth, gain, order = settings.ks, settings.depth, settings.gain, settings.score_order
    scored = [score_run(r, ks, depth, gain, order) for r in runs]
    count = len(runs)
    aligned: list[list[RunScores]] = [list(scored) for _ in range(count)]  # [a][b]
    exact = True
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            drift = compare_runs(runs[b], runs[a], depth, settings.score_drift)
            exact = exact and drift.score_drift == 0.0
            moved = align_run(runs[b], runs[a], drift.tie_tolerance(settings.score_drift), order)
            if moved is not runs[b]:
                aligned[a][b] = score_run(moved, ks, depth, gain, order)
    common = sorted(set.intersection(*(set(s.per_case) for s in scored)))
    canaries = []
    for case in common:
        names = {aggregate_name(n): n for n in scored[0].per_case[case]}
        canaries.append(
            Canary(
                scored[0].weights[case],
                {m: tuple(s.per_case[case][n] for s in scored) for m, n in names.items()},
                {
                    m: tuple(
                        tuple(row[b].per_case[case][n] for b in range(count)) for row in aligned
                    )
                    for m, n in names.items()
                },
            )
        )
    return Canaries(tuple(canaries), exact)
