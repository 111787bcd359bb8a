"""The power simulation's p-values: the verdict's permutation test's, exactly or closely."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.sign_flip import EXACT_AT_MOST, drop_p_value, hoeffding_bound
from ragcanary.measure.stats import permutation_test


def _binary(rng: random.Random, m: int) -> list[float]:
    return [rng.choice((-1.0, -1.0, 1.0)) for _ in range(m)]


def _graded(rng: random.Random, m: int) -> list[float]:
    return [rng.gauss(-0.05, 0.2) for _ in range(m)]


def _drops_and_jitter(rng: random.Random, m: int) -> list[float]:
    return [-rng.uniform(0.3, 1.0) for _ in range(4)] + [rng.gauss(0, 0.1) for _ in range(m - 4)]


@pytest.mark.parametrize(
    ("make", "m"),
    [(make, m) for make in (_binary, _graded) for m in (1, 5, 9, 13)]
    + [(_drops_and_jitter, m) for m in (5, 9, 13)],
)
def test_few_deltas_give_the_permutation_tests_exact_p_value(make, m: int) -> None:
    """Up to 13 deltas permutation_test enumerates every sign pattern: the same p to the bit."""
    deltas = [*make(random.Random(m), m), 0.0, 0.0]  # zeros take no part
    assert drop_p_value(deltas) == pytest.approx(permutation_test(deltas, rounds=1 << 13))


def test_up_to_twenty_deltas_are_exact() -> None:
    """Twenty deltas of distinct sizes: the exact share, checked against 10**5 random patterns."""
    deltas = _graded(random.Random(3), EXACT_AT_MOST)
    assert len(set(map(abs, deltas))) == EXACT_AT_MOST
    assert drop_p_value(deltas) == pytest.approx(
        permutation_test(deltas, rounds=100_000, seed=1), abs=0.003
    )


@pytest.mark.parametrize(("losses", "gains"), [(20, 10), (40, 27), (60, 45), (100, 80)])
def test_equal_sized_deltas_give_the_exact_sign_test(losses: int, gains: int) -> None:
    """A binary metric's deltas are ±1: the p-value is P(Binomial(m, 1/2) <= gains) exactly."""
    m = losses + gains
    exact = sum(math.comb(m, j) for j in range(gains + 1)) / 2**m
    assert drop_p_value([-1.0] * losses + [1.0] * gains) == pytest.approx(exact, rel=1e-9)


def test_deltas_of_two_sizes_are_convolved_exactly() -> None:
    """Halves and thirds (a recall's steps): the sum over both binomials, counted here by hand."""
    halves, thirds = [-0.5] * 14 + [0.5] * 6, [-1 / 3] * 9 + [1 / 3] * 6
    observed = sum(halves) + sum(thirds)
    exact = (
        sum(
            math.comb(20, i) * math.comb(15, j)
            for i in range(21)
            for j in range(16)
            if 0.5 * (2 * i - 20) + (2 * j - 15) / 3 <= observed + 1e-9
        )
        / 2**35
    )
    assert drop_p_value(halves + thirds) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("make", [_graded, _drops_and_jitter])
@pytest.mark.parametrize("m", [30, 80])
def test_many_deltas_of_many_sizes_are_approximated_within_a_hundredth(make, m: int) -> None:
    deltas = make(random.Random(m), m)
    reference = permutation_test(deltas, rounds=20_000, seed=2)
    assert drop_p_value(deltas) == pytest.approx(reference, abs=0.01)


def test_no_drop_gives_one() -> None:
    assert drop_p_value([]) == 1.0
    assert drop_p_value([0.0, 0.0]) == 1.0
    assert hoeffding_bound(0.5, 1.0) == 1.0
    assert hoeffding_bound(-0.5, 0.0) == 1.0


# Deltas of metrics, not float noise: below 1e-12 the test counts every pattern as a tie.
_DELTA = st.floats(min_value=-1, max_value=1).filter(lambda d: d == 0 or abs(d) > 1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(_DELTA, min_size=1, max_size=12))
def test_hoeffdings_bound_is_never_below_the_exact_p_value(deltas: list[float]) -> None:
    """The simulation skips the test where the bound decides: that is only safe above it."""
    total, squares = math.fsum(deltas), math.fsum(d * d for d in deltas)
    assert drop_p_value(deltas) <= hoeffding_bound(total, squares) + 1e-12
