"""Statistical power of the verdict: the smallest drop it catches, and the canaries a drop needs.

The model (docs/cli.md, "calibrate --power"):

- **Noise.** A canary's metric values in the calibration runs of the unchanged target are its
  noise: a simulated baseline run and current run give each canary the values of two distinct
  calibration runs drawn at random, independently of the other canaries. With them comes the
  current value once the reorderings the score jitter explains are undone against that
  baseline (``drift.align_run``): the verdict's noise-free second opinion.
- **Drop.** A degradation makes some canaries lose their relevant documents from the results
  (an index that lost or mis-embedded them): each canary does so independently with the same
  probability ``q``, and every metric of a canary that does is 0 in the current run. A drop of
  ``d`` in a metric is the ``q`` whose *expected* aggregate loss is ``d``: ``q`` times the
  metric's mean over the calibration runs.
- **Detection.** The verdict fails the run on the metric (``verdict._beyond_noise``): the paired
  mean drop is above ``max_drop`` and the paired sign-flip test's one-sided p-value is below
  ``significance`` or, on a deterministic target (no result's score moved between calibration
  runs), at least ``MIN_EXACT_CASES`` canaries dropped; and the same holds on the noise-free
  values (``verdict.judge``'s second opinion).

Power is simulated, seeded. In each simulated pair of runs the canaries are affected in the
order of a uniform draw each, so the pair detects the drop from some ``q`` on; power at ``q``
is the share of pairs whose threshold is at most ``q``, and the 80 % power point is their 80th
percentile. The p-values come from ``sign_flip.drop_p_value`` (exact up to 20 non-zero deltas,
normal beyond), skipped where Hoeffding's bound already decides.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ragcanary.measure.metrics import is_judged_share
from ragcanary.measure.sign_flip import drop_p_value, hoeffding_bound
from ragcanary.measure.verdict import MIN_EXACT_CASES, Policy

POWER = 0.8
SIMULATIONS = 1_000  # simulated run pairs behind each minimum detectable drop
SEARCH_SIMULATIONS = 400  # behind each canary count of ``canaries_needed``
MOST_CANARIES = 2_000  # the largest suite ``canaries_needed`` tries
_TIE = 1e-12  # as the verdict: a delta this small is no drop


@dataclass(frozen=True)
class Canary:
    """One canary's weight and its value of each metric in every calibration run.

    ``aligned[metric][a][b]`` is the value in run b once its noise-explained reorderings are
    undone against run a; without it, run b's own value.
    """

    weight: float
    values: Mapping[str, Sequence[float]]  # aggregate metric name -> value per run
    aligned: Mapping[str, Sequence[Sequence[float]]] | None = None


@dataclass(frozen=True)
class Detectable:
    """What the verdict can see of one metric on this suite and target.

    ``drop`` is the smallest expected drop of the aggregate detected with ``POWER``, None when
    not even every canary losing its relevant documents is; ``affected`` the share of canaries
    that lose them at that drop; ``noise`` the standard deviation of the paired mean delta
    between two runs of the unchanged target. ``needed`` answers ``canaries_needed`` when asked.
    """

    metric: str
    mean: float
    noise: float
    drop: float | None
    affected: float | None
    needed: int | None = None


@dataclass(frozen=True)
class _Profile:
    """A canary's weight and values of one metric, with their mean, and the aligned values."""

    weight: float
    values: tuple[float, ...]
    aligned: tuple[tuple[float, ...], ...] | None = None

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / len(self.values)


def profiles(canaries: Sequence[Canary], metric: str) -> list[_Profile]:
    """The canaries' values of ``metric``, those with a value in every run."""
    return [
        _Profile(
            c.weight,
            tuple(c.values[metric]),
            None if c.aligned is None else tuple(map(tuple, c.aligned[metric])),
        )
        for c in canaries
        if metric in c.values and len(c.values[metric]) >= 2 and c.weight > 0
    ]


def metric_mean(found: Sequence[_Profile]) -> float:
    """The weighted mean over canaries of each canary's mean: the aggregate's expected value."""
    total = math.fsum(p.weight for p in found)
    return math.fsum(p.weight * p.mean for p in found) / total if total > 0 else 0.0


def paired_noise(found: Sequence[_Profile]) -> float:
    """The standard deviation of the weighted paired mean delta between two unchanged runs.

    Each canary contributes the mean squared difference of its values over pairs of distinct
    runs (an unbiased estimate of its paired variance); the deltas' mean is 0 by symmetry.
    """
    total = math.fsum(p.weight for p in found)
    if total <= 0:
        return 0.0
    variance = 0.0
    for p in found:
        r = len(p.values)
        pairs = math.fsum((a - b) ** 2 for a in p.values for b in p.values) / (r * (r - 1))
        variance += p.weight * p.weight * pairs
    return math.sqrt(variance) / total


class _Side:
    """The running sums of one side of the verdict's test on a simulated pair of runs.

    ``amounts`` holds each canary's weighted delta; the verdict's paired mean is their sum over
    the total weight, and the sign-flip test sees them as they are (its p is scale-free).
    """

    def __init__(self, amounts: list[float]) -> None:
        self.amounts = amounts
        self.total = math.fsum(amounts)
        self.squares = math.fsum(a * a for a in amounts)
        self.dropped = sum(1 for a in amounts if a < -_TIE)

    def add(self, amount: float) -> None:
        self.amounts.append(amount)
        self.total += amount
        self.squares += amount * amount
        self.dropped += amount < -_TIE

    def replace(self, index: int, amount: float) -> None:
        old = self.amounts[index]
        self.amounts[index] = amount
        self.total += amount - old
        self.squares += amount * amount - old * old
        self.dropped += (amount < -_TIE) - (old < -_TIE)

    def detected(self, weight: float, policy: Policy, exact: bool) -> bool:
        """Whether these deltas are a drop beyond ``max_drop`` and noise
        (``verdict._beyond_noise``)."""
        if weight <= 0 or -self.total / weight <= policy.max_drop + 1e-12:
            return False
        if exact and self.dropped >= MIN_EXACT_CASES:
            return True
        if hoeffding_bound(self.total, self.squares) < policy.significance:
            return True  # the exact p-value is below the bound
        return drop_p_value(self.amounts) < policy.significance


class _Pair:
    """A simulated pair of runs as seen by the verdict: the deltas as measured, and the
    noise-free ones of its second opinion."""

    def __init__(self, measured: list[float], aligned: list[float], weight: float) -> None:
        self.measured = _Side(measured)
        self.aligned = _Side(aligned)
        self.weight = weight

    def add(self, measured: float, aligned: float, weight: float) -> None:
        self.measured.add(measured)
        self.aligned.add(aligned)
        self.weight += weight

    def lose(self, index: int, amount: float) -> None:
        """Canary ``index`` lost its relevant documents: its delta is ``amount`` either way."""
        self.measured.replace(index, amount)
        self.aligned.replace(index, amount)

    def detected(self, policy: Policy, exact: bool) -> bool:
        """Whether the verdict fails the run on this metric (``verdict.judge``)."""
        return self.measured.detected(self.weight, policy, exact) and self.aligned.detected(
            self.weight, policy, exact
        )


def _draw_pair(profile: _Profile, rng: random.Random) -> tuple[float, float, float]:
    """(baseline, current, current aligned to the baseline) from two distinct calibration runs."""
    r = len(profile.values)
    first = rng.randrange(r)
    second = rng.randrange(r - 1)
    second += second >= first
    current = profile.values[second]
    aligned = current if profile.aligned is None else profile.aligned[first][second]
    return profile.values[first], current, aligned


def _thresholds(
    found: Sequence[_Profile], policy: Policy, exact: bool, sims: int, seed: int
) -> list[float]:
    """For each simulated pair of runs, the smallest share ``q`` from which it detects a drop.

    A canary is affected when its uniform draw is at most ``q``; the canaries are added in the
    order of their draws until the verdict fails the run (``inf`` when it never does).
    """
    rng = random.Random(seed)
    weight = math.fsum(p.weight for p in found)
    out = []
    for _ in range(sims):
        drawn = [_draw_pair(p, rng) for p in found]
        pair = _Pair(
            [p.weight * (c - b) for p, (b, c, _) in zip(found, drawn, strict=True)],
            [p.weight * (a - b) for p, (b, _, a) in zip(found, drawn, strict=True)],
            weight,
        )
        draws = [rng.random() for _ in found]
        threshold = math.inf
        if pair.detected(policy, exact):
            threshold = 0.0
        else:
            for i in sorted(range(len(found)), key=draws.__getitem__):
                pair.lose(i, -found[i].weight * drawn[i][0])
                if pair.detected(policy, exact):
                    threshold = draws[i]
                    break
        out.append(threshold)
    return out


def _quantile(thresholds: Sequence[float], power: float) -> float:
    """The smallest ``q`` at which at least ``power`` of the simulated pairs detect the drop."""
    ordered = sorted(thresholds)
    return ordered[max(0, math.ceil(power * len(ordered) - 1e-9) - 1)]


def detectable(
    canaries: Sequence[Canary],
    metric: str,
    policy: Policy,
    exact: bool = False,
    *,
    sims: int = SIMULATIONS,
    power: float = POWER,
    seed: int = 0,
) -> Detectable:
    """The smallest drop of ``metric`` the verdict detects with ``power`` on these canaries."""
    found = profiles(canaries, metric)
    mean = metric_mean(found)
    noise = paired_noise(found)
    if not found or mean <= 0:
        return Detectable(metric, mean, noise, None, None)
    share = _quantile(_thresholds(found, policy, exact, sims, seed), power)
    if share > 1.0:
        return Detectable(metric, mean, noise, None, None)
    return Detectable(metric, mean, noise, share * mean, share)


def power_at(
    canaries: Sequence[Canary],
    metric: str,
    drop: float,
    policy: Policy,
    exact: bool = False,
    *,
    sims: int = SIMULATIONS,
    seed: int = 0,
) -> float:
    """The share of simulated pairs of runs in which the verdict detects an expected ``drop``."""
    found = profiles(canaries, metric)
    mean = metric_mean(found)
    if not found or mean <= 0:
        return 0.0
    share = drop / mean
    thresholds = _thresholds(found, policy, exact, sims, seed)
    return sum(1 for t in thresholds if t <= share) / len(thresholds)


def canaries_needed(
    canaries: Sequence[Canary],
    metric: str,
    drop: float,
    policy: Policy,
    exact: bool = False,
    *,
    sims: int = SEARCH_SIMULATIONS,
    power: float = POWER,
    most: int = MOST_CANARIES,
    seed: int = 0,
) -> int | None:
    """How many canaries like these the verdict needs to detect an expected ``drop`` with
    ``power``; None when no suite of up to ``most`` canaries does.

    A suite of n canaries is drawn from these with replacement (each with its weight and
    noise). Every simulated suite grows one canary at a time, so one pass gives the power at
    every n; the answer is the smallest n from which power stays at or above ``power`` for the
    next tenth of sizes (a binary metric's power is not quite monotone in n). A drop not above
    ``max_drop``, or above the metric's mean, is never detected.
    """
    found = profiles(canaries, metric)
    mean = metric_mean(found)
    if not found or mean <= 0 or drop <= policy.max_drop + 1e-12 or drop > mean + 1e-12:
        return None
    share = drop / mean
    rng = random.Random(seed)
    suites = [_growing_suite(found, share, rng) for _ in range(sims)]
    states = [_Pair([], [], 0.0) for _ in range(sims)]
    first_held: int | None = None
    for n in range(1, most + 1):
        hits = 0
        for suite, state in zip(suites, states, strict=True):
            state.add(*next(suite))
            hits += state.detected(policy, exact)
        if hits >= power * sims - 1e-9:
            if first_held is None:
                first_held = n
            if n >= first_held + max(1, first_held // 10):
                return first_held
        else:
            first_held = None
    return first_held


def _growing_suite(
    found: Sequence[_Profile], share: float, rng: random.Random
) -> Iterator[tuple[float, float, float]]:
    """Canaries drawn from ``found`` one by one: each one's weighted delta as measured and
    noise-free, and its weight."""
    seeded = random.Random(rng.getrandbits(64))
    while True:
        profile = found[seeded.randrange(len(found))]
        baseline, current, aligned = _draw_pair(profile, seeded)
        if seeded.random() < share:
            current = aligned = 0.0
        w = profile.weight
        yield w * (current - baseline), w * (aligned - baseline), w


def suite_power(
    canaries: Sequence[Canary],
    policy: Policy,
    exact: bool = False,
    drop: float | None = None,
    *,
    sims: int = SIMULATIONS,
    seed: int = 0,
) -> list[Detectable]:
    """``detectable`` for every metric of the canaries that the verdict judges as a drop, by
    name; with ``drop``, each one's ``canaries_needed`` too."""
    # Judged@k measures how far the labels reach: the verdict reports it, never fails on it.
    metrics = sorted({m for c in canaries for m in c.values if not is_judged_share(m)})
    found = []
    for metric in metrics:
        result = detectable(canaries, metric, policy, exact, sims=sims, seed=seed)
        if drop is not None:
            needed = canaries_needed(canaries, metric, drop, policy, exact, seed=seed)
            result = replace(result, needed=needed)
        found.append(result)
    return found
