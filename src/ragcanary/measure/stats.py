"""Paired significance of per-case deltas: seeded sign-flip permutation test and bootstrap CI.

Plain Python, so that `pip install ragcanary` needs no numpy. Both draw from
``random.Random(seed)``, so the same runs always give the same p-values and intervals.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter, mul, truediv
from typing import Literal

Alternative = Literal["less", "greater", "two-sided"]

# Relative slack so a permuted mean equal to the observed one up to rounding counts as a tie.
_TOLERANCE = 1e-12
# The bootstrap counts draws of each moved case (``_counted_cis``) when at most this many moved:
# m counts of n characters in C beat mapping n indices in Python up to about this m.
_COUNTED_AT_MOST = 16
_CHARS = 0x110000  # indices read as characters must be code points


def _validated(values: list[float], weights: Sequence[float] | None) -> list[float]:
    """The weights of ``values`` (1.0 each by default), checked for length, sign and finiteness."""
    w = [1.0] * len(values) if weights is None else list(map(float, weights))
    if len(w) != len(values):
        raise ValueError(f"{len(values)} deltas but {len(w)} weights")
    if not (all(map(math.isfinite, values)) and all(map(math.isfinite, w))):
        raise ValueError("deltas and weights must be finite")
    if w and min(w) < 0:
        raise ValueError("weights must not be negative")
    return w


def permutation_test(
    deltas: Sequence[float],
    weights: Sequence[float] | None = None,
    *,
    alternative: Alternative = "less",
    rounds: int = 10_000,
    seed: int = 0,
) -> float:
    """p-value of a paired sign-flip permutation test on the weighted mean of ``deltas``.

    ``deltas`` are per-case current - baseline values. Under the null hypothesis
    each delta is as likely to have the opposite sign, so the observed weighted
    mean is compared with the means of sign-flipped copies. ``alternative="less"``
    tests for a drop, ``"greater"`` for a gain, ``"two-sided"`` for either. With
    at most ``rounds`` sign vectors in all they are enumerated and p is exact;
    otherwise ``rounds`` random sign vectors give p = (hits + 1) / (rounds + 1).
    Empty or all-zero deltas give 1.0.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    values = list(map(float, deltas))
    w = _validated(values, weights)
    total_weight = math.fsum(w)
    if total_weight <= 0:
        return 1.0
    # Cases with a zero delta or zero weight look the same under either sign: leaving
    # them out keeps the distribution of the mean and makes exact enumeration likelier.
    contrib = list(filter(None, map(truediv, map(mul, values, w), repeat(total_weight))))
    n = len(contrib)
    if n == 0:
        return 1.0
    observed = math.fsum(contrib)
    tol = _TOLERANCE * max(1.0, math.fsum(abs(c) for c in contrib))
    tables = _sign_tables(contrib)
    width = len(tables)
    table_sum = list.__getitem__
    exact = n < 63 and 1 << n <= rounds
    draw = random.Random(seed).getrandbits
    codes = range(1 << n) if exact else (draw(n) for _ in range(rounds))
    # Bit i of a code flips case i; byte j of it picks its entry in table j.
    means = (sum(map(table_sum, tables, code.to_bytes(width, "little"))) for code in codes)
    if alternative == "less":
        hits = sum(1 for mean in means if mean <= observed + tol)
    elif alternative == "greater":
        hits = sum(1 for mean in means if mean >= observed - tol)
    else:
        hits = sum(1 for mean in means if abs(mean) >= abs(observed) - tol)
    return hits / (1 << n) if exact else (hits + 1) / (rounds + 1)


def _sign_tables(contrib: list[float]) -> list[list[float]]:
    """For each run of eight cases, the sum of their signed values under every sign pattern.

    A sign vector's mean is then one table lookup per eight cases instead of one
    multiplication per case. Entry ``code`` of a table flips case i of its run when bit i
    of ``code`` is set.
    """
    tables = []
    for start in range(0, len(contrib), 8):
        table = [0.0]
        for c in contrib[start : start + 8]:
            table = [t + c for t in table] + [t - c for t in table]
        tables.append(table)
    return tables


def bootstrap_ci(
    deltas: Sequence[float],
    weights: Sequence[float] | None = None,
    *,
    confidence: float = 0.95,
    rounds: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the weighted mean of ``deltas``.

    Cases are resampled with replacement ``rounds`` times; cases of weight 0 take
    no part. Empty input (or all weights 0) gives (0.0, 0.0).
    """
    (interval,) = bootstrap_cis(
        [[d] for d in deltas], weights, confidence=confidence, rounds=rounds, seed=seed, columns=1
    )
    return interval


def bootstrap_cis(
    deltas: Sequence[Sequence[float]],
    weights: Sequence[float] | None = None,
    *,
    confidence: float = 0.95,
    rounds: int = 10_000,
    seed: int = 0,
    columns: int | None = None,
) -> list[tuple[float, float]]:
    """``bootstrap_ci`` of every column of ``deltas`` (one row a case, one column a metric).

    All columns share the same resamples, drawn once: each column's interval is what
    ``bootstrap_ci`` gives for it alone, at a fraction of the cost of one call a metric.
    ``columns`` says how many there are when ``deltas`` may have no rows.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    width = columns if columns is not None else (len(deltas[0]) if deltas else 0)
    rows = [list(map(float, row)) for row in deltas]
    if any(len(row) != width for row in rows):
        raise ValueError(f"every row of deltas must hold {width} numbers")
    if not all(all(map(math.isfinite, row)) for row in rows):
        raise ValueError("deltas and weights must be finite")
    w = _validated([0.0] * len(rows), weights)
    kept = [i for i, x in enumerate(w) if x > 0]
    n = len(kept)
    if n == 0:
        return [(0.0, 0.0)] * width
    kept_weights = [w[i] for i in kept]
    uniform_weight = kept_weights[0] if len(set(kept_weights)) == 1 else None
    # Only cases with a non-zero delta add to a numerator. A resample's cases are looked up in
    # ``slot`` (a case's 1-based place among those, or 0) and the zeros dropped, so that a run
    # where most cases did not move costs little. The sums are the same to the last bit; when
    # few moved, ``_counted_cis`` adds them by counts, which differs in the last bits only.
    moved = [i for i in kept if any(rows[i])]
    if not moved:
        return [(0.0, 0.0)] * width  # every resample's mean is 0
    slot = [0] * len(w)
    for place, i in enumerate(moved, start=1):
        slot[i] = place
    slots = [slot[i] for i in kept]
    weighted = [[0.0, *(rows[i][j] * w[i] for i in moved)] for j in range(width)]
    draw = _index_sampler(n, seed)
    if uniform_weight is not None and len(moved) <= _COUNTED_AT_MOST and n < _CHARS:
        return _counted_cis(draw, slots, weighted, n * uniform_weight, rounds, confidence)
    means: list[list[float]] = [[] for _ in range(width)]
    for _ in range(rounds):
        indices = draw()
        picked = [*filter(None, itemgetter(*indices)(slots))] if n > 1 else slots[:1]
        total_weight = (
            n * uniform_weight
            if uniform_weight is not None
            else sum(itemgetter(*indices)(kept_weights) if n > 1 else kept_weights)
        )
        for column, out in zip(weighted, means, strict=True):
            out.append(_sum_at(column, picked) / total_weight)
    return _intervals(means, confidence)


def _counted_cis(
    draw: Callable[[], memoryview],
    slots: list[int],
    weighted: list[list[float]],
    total_weight: float,
    rounds: int,
    confidence: float,
) -> list[tuple[float, float]]:
    """``bootstrap_cis`` when few cases moved and all weigh the same: each resample's sums are
    the moved cases' values times how often the resample drew each.

    Mapping every drawn index through ``slots`` costs a Python object per case and round; a
    run of hundreds of canaries where a handful moved spent most of its evaluation there. The
    draws are read as text instead, one character per index, and ``str.count`` counts each
    moved case's in C. The same resamples as the general path; the sums differ from it in the
    last bits only, since they add counted multiples rather than one draw at a time.
    """
    marks = [(chr(position), place) for position, place in enumerate(slots) if place]
    means: list[list[float]] = [[] for _ in weighted]
    for _ in range(rounds):
        drawn = draw().tobytes().decode("utf-32-le", "surrogatepass")
        counts = [(drawn.count(mark), place) for mark, place in marks]
        for column, out in zip(weighted, means, strict=True):
            total = 0.0
            for count, place in counts:
                if count:
                    total += count * column[place]
            out.append(total / total_weight)
    return _intervals(means, confidence)


def _intervals(means: list[list[float]], confidence: float) -> list[tuple[float, float]]:
    """The percentile interval of each column's resampled means."""
    alpha = 1.0 - confidence
    return [(_quantile(m, alpha / 2), _quantile(m, 1.0 - alpha / 2)) for m in means]


def _sum_at(values: list[float], places: list[int]) -> float:
    """The sum of ``values`` at ``places``, repeats included, in the order given."""
    if len(places) > 1:
        total: float = sum(itemgetter(*places)(values))
        return total
    return values[places[0]] if places else 0.0


def _index_sampler(n: int, seed: int) -> Callable[[], memoryview]:
    """A function drawing ``n`` indices in [0, n) with replacement, all at once.

    Each index is the high half of a 32-bit random number times ``n`` (Lemire's
    multiply-shift), done for all ``n`` lanes in one big-integer product: every case's
    chance differs from 1/n by less than n / 2**32, far below the Monte Carlo error.
    """
    draw = random.Random(seed).getrandbits
    low_halves = int.from_bytes(b"\xff\xff\xff\xff\x00\x00\x00\x00" * n, "little")

    def sample() -> memoryview:
        lanes = (draw(64 * n) & low_halves) * n
        # Native byte order, so that the cast reads each 64-bit lane's high half at [1::2].
        halves = memoryview(lanes.to_bytes(8 * n, sys.byteorder)).cast("I")
        return halves[1::2] if sys.byteorder == "little" else halves[0::2]

    return sample


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile with linear interpolation between order statistics."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of one family of tests, in the order given.

    With the m p-values sorted ascending, p(1) ≤ … ≤ p(m), the adjusted value of the i-th is
    ``max over j ≤ i of min(1, (m - j + 1) · p(j))`` (Holm 1979, as ``statsmodels``'
    ``multipletests(method="holm")`` computes it). Rejecting each test whose adjusted value is
    below a level keeps the family-wise error rate at that level under any dependence.
    Equal p-values keep their order, so they get equal adjusted values.
    """
    values = list(map(float, p_values))
    if not all(0.0 <= p <= 1.0 for p in values):
        raise ValueError(f"p-values must lie in [0, 1], got {values}")
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=values.__getitem__)):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted
