"""The verdict's power: the smallest drop it catches, against exact counts and the verdict."""

from __future__ import annotations

import math
import random

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.calibrate import power_canaries
from ragcanary.measure.power import (
    Canary,
    canaries_needed,
    detectable,
    power_at,
    suite_power,
)
from ragcanary.measure.scoring import RunScores
from ragcanary.measure.stats import permutation_test
from ragcanary.measure.verdict import Policy, judge
from ragcanary.suites.judge import settings_for

METRIC = "hit_rate@5"


def _steady(n: int, value: float = 1.0, runs: int = 5) -> list[Canary]:
    """``n`` canaries whose metric is ``value`` in every run: no noise at all."""
    return [Canary(1.0, {METRIC: (value,) * runs}) for _ in range(n)]


def _at_least(n: int, q: float, k: int) -> float:
    """P(Binomial(n, q) >= k)."""
    return 1.0 - sum(math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k))


@pytest.mark.parametrize(
    ("policy", "exact", "fewest"),
    [
        # The test alone: 2**-K < 0.05 takes K = 5 canaries losing their hit.
        (Policy(), False, 5),
        # A deterministic target: 2 canaries and a drop over max_drop 0.02, so 3 of 100.
        (Policy(), True, 3),
        # max_drop 0.1 binds before the test: 11 of 100.
        (Policy(max_drop=0.1), False, 11),
        # A stricter significance: 2**-K < 0.01 takes K = 7.
        (Policy(significance=0.01), False, 7),
    ],
)
def test_a_noiseless_suite_needs_a_known_number_of_canaries_to_lose(
    policy: Policy, exact: bool, fewest: int
) -> None:
    """Without noise the verdict fails the run once ``fewest`` of 100 canaries lost their hit,
    so power at a drop d is P(Binomial(100, d) >= fewest): at the printed drop it is 0.8
    within the simulation's error (1,000 pairs: a standard error of 0.013)."""
    found = detectable(_steady(100), METRIC, policy, exact)
    assert found.drop is not None
    assert found.affected == pytest.approx(found.drop)  # every canary's mean is 1
    assert _at_least(100, found.drop, fewest) == pytest.approx(0.8, abs=0.04)
    assert found.noise == 0.0
    assert found.mean == 1.0


def test_the_drop_is_the_expected_loss_of_the_aggregate() -> None:
    """Canaries at 0.5: the drop is the share of canaries affected times the mean."""
    found = detectable(_steady(100, 0.5), METRIC, Policy())
    assert found.drop is not None
    assert found.affected is not None
    assert found.drop == pytest.approx(0.5 * found.affected)
    assert _at_least(100, found.affected, 5) == pytest.approx(0.8, abs=0.04)


def test_too_few_canaries_never_reach_the_significance() -> None:
    """Four canaries: at best p = 1/16, so no drop is detected, even every canary losing."""
    assert detectable(_steady(4), METRIC, Policy()).drop is None
    assert detectable(_steady(4), METRIC, Policy(), exact=True).drop is not None


def test_a_metric_at_zero_cannot_drop() -> None:
    found = detectable(_steady(50, 0.0), METRIC, Policy())
    assert (found.drop, found.affected, found.mean) == (None, None, 0.0)


def _flipping(n: int, runs: int, flip: float, seed: int) -> list[Canary]:
    """``n`` canaries at hit_rate 1, every other one missing its hit in a run with ``flip``."""
    rng = random.Random(seed)
    return [
        Canary(
            1.0, {METRIC: tuple(0.0 if i % 2 and rng.random() < flip else 1.0 for _ in range(runs))}
        )
        for i in range(n)
    ]


def test_more_noise_needs_a_larger_drop() -> None:
    calm = detectable(_flipping(60, 10, 0.05, seed=1), METRIC, Policy(), sims=300)
    rough = detectable(_flipping(60, 10, 0.3, seed=1), METRIC, Policy(), sims=300)
    assert calm.drop is not None
    assert rough.drop is not None
    assert calm.noise < rough.noise
    assert calm.drop < rough.drop


def _judged(canaries: list[Canary], share: float, rng: random.Random) -> bool:
    """One pair of runs as the model states it, judged by the verdict's drop rule: a paired
    mean drop over max_drop and the verdict's own permutation test (10,000 rounds) below 0.05.

    (``judge`` itself adds a bootstrap interval that costs five times as much and decides
    nothing; ``test_judge_applies_the_same_rule`` checks the rule against it.)
    """
    deltas = []
    for c in canaries:
        values = c.values[METRIC]
        a, b = rng.sample(range(len(values)), 2)
        deltas.append((0.0 if rng.random() < share else values[b]) - values[a])
    policy = Policy()
    return (
        -sum(deltas) / len(deltas) > policy.max_drop + 1e-12
        and permutation_test(deltas, alternative="less", seed=policy.seed) < policy.significance
    )


def test_judge_applies_the_same_rule() -> None:
    """``_judged``'s rule and ``judge`` agree on pairs around the printed drop."""
    canaries = _flipping(40, 8, 0.3, seed=4)
    found = detectable(canaries, METRIC, Policy(), sims=200)
    assert found.affected is not None
    outcomes = set()
    for seed in range(12):
        rule = _judged(canaries, found.affected, random.Random(seed))
        rng = random.Random(seed)
        before, after = {}, {}
        for i, c in enumerate(canaries):
            values = c.values[METRIC]
            a, b = rng.sample(range(len(values)), 2)
            before[f"c{i}"] = {METRIC: values[a]}
            after[f"c{i}"] = {METRIC: 0.0 if rng.random() < found.affected else values[b]}
        weights = dict.fromkeys(before, 1.0)
        verdict = judge(
            RunScores(after, weights, {}, {}),
            1.0,
            Policy(min_rank_overlap=None),
            RunScores(before, weights, {}, {}),
        )
        assert rule == any(f.kind == "drop" and f.metric == METRIC for f in verdict.failures)
        outcomes.add(rule)
    assert outcomes == {True, False}


def test_the_verdict_catches_the_printed_drop_of_a_noisy_suite_four_times_in_five() -> None:
    """40 canaries, half of them missing their hit in 30 % of runs. 200 pairs drawn as the
    model states it and judged by the verdict itself (10,000-round permutation test) detect
    the printed drop 0.8 ± 0.09 of the time: three standard errors of the two simulations."""
    canaries = _flipping(40, 8, 0.3, seed=4)
    found = detectable(canaries, METRIC, Policy())
    assert found.affected is not None
    rng = random.Random(11)
    rate = sum(_judged(canaries, found.affected, rng) for _ in range(200)) / 200
    assert rate == pytest.approx(0.8, abs=0.09)
    # The model's own figure, with other random draws, agrees more closely still.
    assert found.drop is not None
    assert power_at(canaries, METRIC, found.drop, Policy(), seed=5) == pytest.approx(0.8, abs=0.04)


def test_canaries_needed_for_a_drop_of_a_tenth_without_noise() -> None:
    """A drop of 0.1 on noiseless canaries: each loses its hit with chance 0.1 and 5 must; the
    smallest n with P(Binomial(n, 0.1) >= 5) >= 0.8 is 66. 400 simulated suites: within 10 %."""
    exact = next(n for n in range(5, 500) if _at_least(n, 0.1, 5) >= 0.8)
    needed = canaries_needed(_steady(20), METRIC, 0.1, Policy())
    assert needed is not None
    assert abs(needed - exact) <= 0.1 * exact


@pytest.mark.parametrize("drop", [0.01, 0.02, 0.6])
def test_a_drop_within_max_drop_or_above_the_mean_needs_no_number_of_canaries(
    drop: float,
) -> None:
    assert canaries_needed(_steady(20, 0.5), METRIC, drop, Policy()) is None


def test_suite_power_covers_every_metric_and_answers_the_drop() -> None:
    values = {METRIC: (1.0,) * 3, "mrr": (0.5,) * 3, "judged@5": (0.4,) * 3}
    canaries = [Canary(1.0, values) for _ in range(30)]
    found = suite_power(canaries, Policy(), drop=0.2, sims=200)
    assert [f.metric for f in found] == [METRIC, "mrr"]  # by name; judged@k is never a drop
    assert all(f.needed is not None for f in found)


SUITE = SuiteConfig(cases="core.yaml", targets=["search"], k=[1, 3], depth=5)


def test_calibration_runs_become_canaries_with_their_aligned_values() -> None:
    """Run 1 swaps a canary's top two within its score jitter: hit_rate@1 is 0 as measured
    and 1 once aligned to run 0, as the verdict's second opinion sees it."""
    steady, swapped = case("steady", ["a"]), case("swapped", ["r"])
    first = run(
        [(steady, answer(["a", "b"], [0.9, 0.5])), (swapped, answer(["r", "x"], [0.9, 0.899]))],
        run_id="run-0",
    )
    second = run(
        [
            (steady, answer(["a", "b"], [0.9004, 0.4996])),
            (swapped, answer(["x", "r"], [0.8995, 0.8994])),
        ],
        run_id="run-1",
    )
    found = power_canaries([first, second], settings_for(SUITE))
    assert not found.exact
    by_case = {c.values["hit_rate@1"]: c for c in found.canaries}
    moved = by_case[(1.0, 0.0)]
    assert moved.aligned is not None
    assert moved.aligned["hit_rate@1"][0][1] == 1.0  # run 1 aligned to run 0
    assert moved.aligned["hit_rate@1"][1][0] == 0.0  # run 0 aligned to run 1 takes its order
    assert set(by_case) == {(1.0, 0.0), (1.0, 1.0)}


def test_identical_runs_are_a_deterministic_target() -> None:
    pairs = [(case(f"c{i}", [f"r{i}"]), answer([f"r{i}", "x"], [0.9, 0.5])) for i in range(3)]
    found = power_canaries([run(pairs, run_id=f"run-{r}") for r in range(3)], settings_for(SUITE))
    assert found.exact
    assert len(found.canaries) == 3
    assert all(c.values["mrr"] == (1.0, 1.0, 1.0) for c in found.canaries)


def test_one_run_is_not_enough() -> None:
    pairs = [(case("c", ["r"]), answer(["r"], [0.9]))]
    with pytest.raises(ValueError, match="at least two calibration runs"):
        power_canaries([run(pairs)], settings_for(SUITE))
