"""Fast p-values of the verdict's paired sign-flip test, for power simulations.

``stats.permutation_test`` draws 10,000 sign vectors per call: right for one verdict, too slow
for the hundreds of thousands of tests a power simulation asks. ``drop_p_value`` gives the
same one-sided ("less") p-value of the weighted mean of per-case deltas another way:

- exactly, when at most ``EXACT_AT_MOST`` deltas are non-zero, by meeting in the middle (the
  2**m sign patterns as the sums of two halves of 2**(m/2) each, one half sorted);
- exactly, when the deltas take few distinct sizes (a binary metric's are all alike, a
  recall's a few fractions): the flips of each size are binomial, and their distributions
  are convolved while the distinct sums stay under ``MOST_SUMS``;
- otherwise by the normal approximation of the sign-flip distribution (mean 0, variance the
  sum of the squared contributions), with a continuity correction when the deltas lie on a
  lattice (every one a whole multiple of the smallest).

``hoeffding_bound`` is an upper bound of the exact p-value that needs only two sums, so that a
simulation skips the computation whenever the bound alone already decides.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence

# Nonzero deltas up to which the p-value is exact: 2**10 sums per half, a millisecond or two.
EXACT_AT_MOST = 20
# The most distinct sums the binomial convolution may reach (the product of each size's count
# plus one bounds them) for it to be used instead of the normal approximation.
MOST_SUMS = 60_000
_TOLERANCE = 1e-12  # as stats.permutation_test: a permuted sum equal to the observed one counts
_LATTICE = 1e-6  # relative slack when checking that every delta is a multiple of the smallest


def hoeffding_bound(total: float, squares: float) -> float:
    """An upper bound of the sign-flip p-value of an observed sum ``total`` below zero.

    The permuted sum adds terms ``±c_i``; Hoeffding's inequality bounds the chance that it
    falls to ``total`` by ``exp(-total**2 / (2 * sum c_i**2))``. Returns 1.0 for ``total >= 0``.
    """
    if total >= 0 or squares <= 0:
        return 1.0
    return math.exp(-total * total / (2.0 * squares))


def drop_p_value(contributions: Sequence[float]) -> float:
    """One-sided p-value that the sum of ``contributions`` (weighted per-case deltas) is a drop.

    The same quantity ``stats.permutation_test(..., alternative="less")`` estimates: the share
    of sign patterns whose sum is at most the observed one. Exact up to ``EXACT_AT_MOST``
    non-zero contributions, a normal approximation beyond (see the module docstring).
    """
    values = [c for c in contributions if c != 0.0]
    if not values:
        return 1.0
    if len(values) <= EXACT_AT_MOST:
        return _exact(values)
    grouped = _grouped(values)
    return _normal(values) if grouped is None else grouped


def _exact(values: list[float]) -> float:
    """The share of the 2**m sign patterns whose sum is at most the observed sum."""
    observed = math.fsum(values)
    tol = _TOLERANCE * max(1.0, math.fsum(abs(v) for v in values))
    half = len(values) // 2
    left = _signed_sums(values[:half])
    right = sorted(_signed_sums(values[half:]))
    limit = observed + tol
    hits = sum(bisect_right(right, limit - s) for s in left)
    return hits / (1 << len(values))


def _grouped(values: list[float]) -> float | None:
    """The exact p-value by convolving, size by size, the binomial sums of equal-sized deltas;
    None when the distinct sums would grow past ``MOST_SUMS``."""
    scale = max(map(abs, values))
    observed = math.fsum(values) / scale
    tol = _TOLERANCE * max(1.0, math.fsum(abs(v) for v in values) / scale)
    sizes = Counter(round(abs(v) / scale, 12) for v in values)
    # The sums are at most the product of (count + 1) over the sizes: bail out before starting.
    bound = 1
    for count in sizes.values():
        bound *= count + 1
        if bound > MOST_SUMS:
            return None
    sums = {0.0: 1.0}  # sum of the signed deltas so far -> its probability
    for size, count in sorted(sizes.items()):
        weights = [math.comb(count, j) / 2.0**count for j in range(count + 1)]
        grown: dict[float, float] = {}
        for total, chance in sums.items():
            for j, weight in enumerate(weights):
                key = round(total + size * (2 * j - count), 10)
                grown[key] = grown.get(key, 0.0) + chance * weight
        sums = grown
    return min(1.0, math.fsum(p for total, p in sums.items() if total <= observed + tol))


def _signed_sums(values: list[float]) -> list[float]:
    """The sum of ``values`` under every pattern of signs."""
    sums = [0.0]
    for v in values:
        sums = [s + v for s in sums] + [s - v for s in sums]
    return sums


def _normal(values: list[float]) -> float:
    """The normal approximation of the sign-flip p-value, continuity-corrected on a lattice."""
    observed = math.fsum(values)
    sd = math.sqrt(math.fsum(v * v for v in values))
    step = min(map(abs, values))
    ratios = [abs(v) / step for v in values]
    # Sums of ±multiples of ``step`` move in steps of 2 * step: half of one is the correction.
    on_lattice = all(abs(r - round(r)) <= _LATTICE * r for r in ratios)
    corrected = observed + (step if on_lattice else 0.0)
    return 0.5 * math.erfc(-corrected / (sd * math.sqrt(2.0)))
