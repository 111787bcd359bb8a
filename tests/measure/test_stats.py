"""Tests of the paired sign-flip permutation test and the bootstrap confidence interval."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.stats import (
    _index_sampler,
    _quantile,
    bootstrap_ci,
    bootstrap_cis,
    holm,
    permutation_test,
)

small_deltas = st.lists(st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0]), max_size=30)


@pytest.mark.parametrize(
    ("deltas", "weights", "alternative", "expected"),
    [
        pytest.param([-1, -1, -1], None, "less", 1 / 8, id="three-drops"),
        pytest.param([-1, -1, -1], None, "greater", 1.0, id="three-drops-greater"),
        pytest.param([-1, -1, -1], None, "two-sided", 2 / 8, id="three-drops-two-sided"),
        pytest.param([1, 1, 1], None, "greater", 1 / 8, id="three-gains"),
        # Sign vectors with mean <= -1/3: (---), (--+) in 3 orders -> 4 of 8.
        pytest.param([-1, -1, 1], None, "less", 4 / 8, id="mixed"),
        # Weights 3,1: means -1, -1/2, +1/2, +1 for the four sign vectors; observed -1.
        pytest.param([-1, -1], [3, 1], "less", 1 / 4, id="weighted"),
        # Means 0, -1, 1, 0: the other zero-mean vector ties with the observed 0.
        pytest.param([-1, 1], None, "less", 3 / 4, id="tie-counts"),
        # 0.1 + 0.2 - 0.3 and -0.1 - 0.2 + 0.3 differ only by rounding: both are ties.
        pytest.param([0.1, 0.2, -0.3], None, "greater", 5 / 8, id="float-tie-greater"),
        pytest.param([0.1, 0.2, -0.3], None, "less", 5 / 8, id="float-tie-less"),
        pytest.param([-1, 0, 0, 0], None, "less", 1 / 2, id="zeros-ignored"),
        pytest.param([-1, -1, 5], [1, 1, 0], "less", 1 / 4, id="zero-weight-ignored"),
    ],
)
def test_exact_enumeration_matches_hand_computed_p(deltas, weights, alternative, expected):
    """With few cases every sign vector is enumerated, so p is an exact fraction."""
    p = permutation_test(deltas, weights, alternative=alternative)
    assert p == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("deltas", "weights"),
    [
        pytest.param([], None, id="empty"),
        pytest.param([0.0] * 40, None, id="all-zero"),
        pytest.param([-1.0, -1.0], [0.0, 0.0], id="no-weight"),
    ],
)
@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_no_evidence_gives_p_of_one(deltas, weights, alternative):
    """Nothing changed (or nothing counts), so nothing is significant."""
    assert permutation_test(deltas, weights, alternative=alternative) == 1.0


def test_clear_drop_is_significant():
    """Half of 60 canaries losing a hit is far beyond sign-flip noise."""
    deltas = [-1.0] * 30 + [0.0] * 30
    assert permutation_test(deltas) < 0.001


def test_single_noisy_case_is_not_significant():
    """One canary out of 60 dropping must not page anyone."""
    deltas = [-1.0] + [0.0] * 59
    assert permutation_test(deltas) >= 0.4


def test_symmetric_noise_is_rarely_significant():
    """Zero-mean noise gives p < 0.05 in about 5% of suites, not more."""
    significant = 0
    for seed in range(40):
        noise = np.random.default_rng(1000 + seed).normal(0.0, 0.2, size=60)
        significant += permutation_test(noise.tolist(), rounds=2000, seed=seed) < 0.05
    assert significant <= 6


def test_random_rounds_give_phipson_smyth_p():
    """Sampled sign vectors give p = (hits + 1) / (rounds + 1), never 0."""
    p = permutation_test([-1.0] * 20, rounds=999)
    assert p == pytest.approx(1 / 1000)


def test_permutation_test_is_deterministic_per_seed():
    """The same seed gives the same p; the daemon must not flap on reruns."""
    deltas = np.random.default_rng(7).normal(-0.05, 0.3, size=80).tolist()
    first = permutation_test(deltas, rounds=3000, seed=11)
    assert permutation_test(deltas, rounds=3000, seed=11) == first
    assert 0.0 < first <= 1.0


@settings(max_examples=100, deadline=None)
@given(deltas=small_deltas, seed=st.integers(0, 2**32 - 1))
def test_less_on_deltas_equals_greater_on_negated_deltas(deltas, seed):
    """Flipping every delta swaps the one-sided alternatives exactly."""
    less = permutation_test(deltas, alternative="less", rounds=500, seed=seed)
    greater = permutation_test([-d for d in deltas], alternative="greater", rounds=500, seed=seed)
    assert less == greater
    assert 0.0 < less <= 1.0


@settings(max_examples=100, deadline=None)
@given(deltas=small_deltas.filter(lambda d: sum(d) <= 0))
def test_two_sided_p_is_at_least_the_one_sided_p_of_the_observed_direction(deltas):
    """A two-sided test counts every sign vector the one-sided test counts, and more."""
    less = permutation_test(deltas, alternative="less", rounds=400)
    two_sided = permutation_test(deltas, alternative="two-sided", rounds=400)
    assert two_sided >= less


def test_permutation_test_rejects_bad_input():
    """Mismatched weights, negative weights and zero rounds are errors, not answers."""
    with pytest.raises(ValueError, match="weights"):
        permutation_test([-1.0, 0.5], [1.0])
    with pytest.raises(ValueError, match="negative"):
        permutation_test([-1.0], [-1.0])
    with pytest.raises(ValueError, match="rounds"):
        permutation_test([-1.0], rounds=0)


@settings(max_examples=50, deadline=None)
@given(
    deltas=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=40),
    seed=st.integers(0, 1000),
)
def test_bootstrap_ci_is_ordered_and_within_the_data(deltas, seed):
    """Lower bound <= upper bound, both inside the range of the deltas."""
    low, high = bootstrap_ci(deltas, rounds=300, seed=seed)
    assert min(deltas) - 1e-12 <= low <= high <= max(deltas) + 1e-12


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_bootstrap_ci_contains_the_mean(confidence):
    """The interval of a moderate sample covers its own weighted mean."""
    rng = np.random.default_rng(3)
    deltas = rng.normal(-0.1, 0.3, size=100)
    weights = rng.uniform(0.5, 2.0, size=100)
    low, high = bootstrap_ci(deltas.tolist(), weights.tolist(), confidence=confidence)
    mean = float(np.average(deltas, weights=weights))
    assert low < mean < high


def test_bootstrap_ci_widens_with_confidence():
    """Asking for more confidence never gives a narrower interval."""
    deltas = np.random.default_rng(5).normal(0.0, 1.0, size=50).tolist()
    low_80, high_80 = bootstrap_ci(deltas, confidence=0.8, rounds=2000)
    low_99, high_99 = bootstrap_ci(deltas, confidence=0.99, rounds=2000)
    assert low_99 <= low_80 < high_80 <= high_99


@pytest.mark.parametrize(
    ("deltas", "weights", "expected"),
    [
        pytest.param([], None, (0.0, 0.0), id="empty"),
        pytest.param([0.3, 0.3, 0.3], None, (0.3, 0.3), id="constant"),
        pytest.param([0.3, -5.0], [1.0, 0.0], (0.3, 0.3), id="zero-weight-ignored"),
        pytest.param([1.0, 2.0], [0.0, 0.0], (0.0, 0.0), id="no-weight"),
    ],
)
def test_bootstrap_ci_degenerate_inputs(deltas, weights, expected):
    """Without spread (or without data) the interval collapses to a point."""
    assert bootstrap_ci(deltas, weights) == pytest.approx(expected)


def test_bootstrap_ci_is_deterministic_per_seed():
    """The same seed gives the same interval."""
    deltas = np.random.default_rng(9).normal(0.0, 1.0, size=30).tolist()
    assert bootstrap_ci(deltas, seed=4, rounds=1000) == bootstrap_ci(deltas, seed=4, rounds=1000)


def test_bootstrap_ci_rejects_bad_confidence():
    """Confidence is a probability strictly between 0 and 1."""
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0], confidence=1.0)


def test_bootstrap_cis_gives_each_column_what_bootstrap_ci_gives_it_alone() -> None:
    """Sharing one set of resamples across metrics must not change any metric's interval."""
    rng = np.random.default_rng(7)
    columns = [rng.normal(size=50).tolist(), (rng.random(50) - 0.6).tolist(), [0.0] * 50]
    weights = (rng.random(50) + 0.5).tolist()
    rows = [list(r) for r in zip(*columns, strict=True)]
    together = bootstrap_cis(rows, weights, rounds=3000, seed=3)
    for column, interval in zip(columns, together, strict=True):
        alone = bootstrap_ci(column, weights, rounds=3000, seed=3)
        assert interval == pytest.approx(alone, abs=1e-12)


def _drawn_one_by_one(
    rows: list[list[float]], weights: list[float], rounds: int, seed: int
) -> list[tuple[float, float]]:
    """The bootstrap as its definition reads: every drawn case's weighted delta, in order."""
    draw = _index_sampler(len(rows), seed)
    means: list[list[float]] = [[] for _ in rows[0]]
    for _ in range(rounds):
        drawn = list(draw())
        total_weight = sum(weights[i] for i in drawn)
        for j, out in enumerate(means):
            out.append(sum(rows[i][j] * weights[i] for i in drawn) / total_weight)
    return [(_quantile(m, 0.025), _quantile(m, 0.975)) for m in means]


@pytest.mark.parametrize(
    ("cases", "moved", "uniform"),
    [
        (200, 0, True),
        (200, 1, True),
        (300, 5, True),
        (40, 16, True),
        (40, 17, True),
        (60, 4, False),
    ],
)
def test_bootstrap_cis_gives_the_definitions_intervals_however_many_cases_moved(
    cases: int, moved: int, uniform: bool
) -> None:
    """Few moved cases take a counting shortcut, many the general path: both give what
    drawing and adding one case at a time gives."""
    rng = np.random.default_rng(cases + moved)
    rows = [[0.0, 0.0, 0.0] for _ in range(cases)]
    for i in rng.choice(cases, size=moved, replace=False):
        rows[int(i)] = rng.normal(size=3).tolist()
    weights = [1.0] * cases if uniform else (rng.random(cases) + 0.5).tolist()
    got = bootstrap_cis(rows, weights, rounds=400, seed=11)
    expected = _drawn_one_by_one(rows, weights, 400, 11)
    flat = [v for ci in expected for v in ci]
    assert [v for ci in got for v in ci] == pytest.approx(flat, rel=1e-12, abs=1e-12)
    if moved == 0:
        assert got == [(0.0, 0.0)] * 3


@pytest.mark.parametrize(
    ("p_values", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([0.03], [0.03], id="one-test-unchanged"),
        # Sorted 0.01, 0.02, 0.04: 3·0.01 = 0.03, 2·0.02 = 0.04, 1·0.04 = 0.04.
        pytest.param([0.04, 0.01, 0.02], [0.04, 0.03, 0.04], id="three"),
        # Sorted 0.01, 0.04, 0.045, 0.30: 0.04, 0.12, 0.09 -> 0.12 (monotone), 0.30.
        pytest.param([0.30, 0.045, 0.01, 0.04], [0.30, 0.12, 0.04, 0.12], id="kept-monotone"),
        pytest.param([0.5, 0.6, 0.9], [1.0, 1.0, 1.0], id="capped-at-one"),
        pytest.param([0.02, 0.02, 1.0], [0.06, 0.06, 1.0], id="ties"),
    ],
)
def test_holm_matches_a_hand_computation(p_values, expected):
    """Holm's step-down: the i-th smallest times (m - i + 1), never below the one before."""
    assert holm(p_values) == pytest.approx(expected, abs=1e-15)


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=12))
def test_holm_never_lowers_a_p_value_and_keeps_the_order(p_values):
    """An adjusted value is at least the raw one, at most 1, and sorts as the raw ones do."""
    adjusted = holm(p_values)
    assert all(p <= a <= 1.0 for p, a in zip(p_values, adjusted, strict=True))
    ranked = sorted(range(len(p_values)), key=p_values.__getitem__)
    assert [adjusted[i] for i in ranked] == sorted(adjusted)


def test_holm_refuses_what_is_not_a_p_value():
    with pytest.raises(ValueError, match="p-values must lie in"):
        holm([0.2, 1.5])
