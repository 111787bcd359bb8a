"""Paired significance of per-case deltas: seeded sign-flip permutation test and bootstrap CI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

Alternative = Literal["less", "greater", "two-sided"]

FloatArray = npt.NDArray[np.float64]

# Random rounds are drawn in blocks so memory stays bounded (block x cases) for large suites.
_BLOCK = 1024
# Relative slack so a permuted mean equal to the observed one up to rounding counts as a tie.
_TOLERANCE = 1e-12


def _arrays(
    deltas: Sequence[float] | FloatArray, weights: Sequence[float] | None
) -> tuple[FloatArray, FloatArray]:
    """Validated arrays of ``deltas`` (one row a case, 1-D or 2-D) and their weights."""
    values = np.asarray(deltas, dtype=np.float64)
    if values.ndim not in (1, 2):
        raise ValueError("deltas must be a flat sequence of numbers")
    cases = values.shape[0]
    if weights is None:
        w = np.ones(cases, dtype=np.float64)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (cases,):
            raise ValueError(f"{cases} deltas but {w.size} weights")
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(w))):
        raise ValueError("deltas and weights must be finite")
    if np.any(w < 0):
        raise ValueError("weights must not be negative")
    return values, w


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
    otherwise ``rounds`` random vectors from ``numpy.random.default_rng(seed)``
    give p = (hits + 1) / (rounds + 1). Empty or all-zero deltas give 1.0.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    values, w = _arrays(deltas, weights)
    total_weight = float(w.sum())
    if total_weight <= 0:
        return 1.0
    contrib: FloatArray = values * w / total_weight
    # Cases with a zero delta or zero weight look the same under either sign: leaving
    # them out keeps the distribution of the mean and makes exact enumeration likelier.
    contrib = contrib[contrib != 0]
    n = int(contrib.size)
    if n == 0:
        return 1.0
    observed = float(contrib.sum())
    tol = _TOLERANCE * max(1.0, float(np.abs(contrib).sum()))

    def hits(signs: FloatArray) -> int:
        means = signs @ contrib
        if alternative == "less":
            extreme = means <= observed + tol
        elif alternative == "greater":
            extreme = means >= observed - tol
        else:
            extreme = np.abs(means) >= abs(observed) - tol
        return int(np.count_nonzero(extreme))

    if n < 63 and 1 << n <= rounds:
        codes = np.arange(1 << n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        return hits(1.0 - 2.0 * (codes & 1).astype(np.float64)) / (1 << n)

    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, rounds, _BLOCK):
        size = min(_BLOCK, rounds - start)
        count += hits(1.0 - 2.0 * rng.integers(0, 2, size=(size, n)).astype(np.float64))
    return (count + 1) / (rounds + 1)


def bootstrap_ci(
    deltas: Sequence[float],
    weights: Sequence[float] | None = None,
    *,
    confidence: float = 0.95,
    rounds: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the weighted mean of ``deltas``.

    Cases are resampled with replacement ``rounds`` times from
    ``numpy.random.default_rng(seed)``; cases of weight 0 take no part. Empty
    input (or all weights 0) gives (0.0, 0.0).
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
    width = columns if columns is not None else (len(deltas[0]) if len(deltas) else 0)
    values, w = _arrays(np.asarray(deltas, dtype=np.float64).reshape(len(deltas), width), weights)
    keep = w > 0
    values, w = values[keep], w[keep]
    n = int(w.size)
    if n == 0:
        return [(0.0, 0.0)] * width
    weighted = values * w[:, None]
    rng = np.random.default_rng(seed)
    means = np.empty((rounds, width), dtype=np.float64)
    for start in range(0, rounds, _BLOCK):
        size = min(_BLOCK, rounds - start)
        picks = rng.integers(0, n, size=(size, n))
        # How often each case was drawn in each round: one matrix product then gives
        # every column's resampled weighted sum at once.
        rows = np.repeat(np.arange(size) * n, n)
        counts = np.bincount(rows + picks.ravel(), minlength=size * n).reshape(size, n)
        counts = counts.astype(np.float64)
        means[start : start + size] = (counts @ weighted) / (counts @ w)[:, None]
    alpha = 1.0 - confidence
    bounds = np.quantile(means, [alpha / 2, 1.0 - alpha / 2], axis=0)
    return [(float(low), float(high)) for low, high in bounds.T]
