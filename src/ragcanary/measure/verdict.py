"""Deciding a run's outcome: floors, significant drops vs the baseline, canary checks, coverage."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, mul, sub
from typing import Literal

from ragcanary.measure.drift import Drift
from ragcanary.measure.metrics import aggregate_name, is_judged_share
from ragcanary.measure.scoring import RunScores
from ragcanary.measure.stats import bootstrap_cis, permutation_test

RunOutcome = Literal["ok", "regression", "unavailable"]

# Resamples behind each confidence interval. The interval only informs; the verdict rests
# on the permutation test's p-value (10,000 sign vectors). 2,000 resamples put each bound
# within about 3% of the interval's half-width of its limit (Efron & Tibshirani's advice
# for percentile intervals) at a fifth of the cost of 10,000 in plain Python.
CI_ROUNDS = 2_000
_TIE = 1e-12  # a per-case delta this small is a tie: float noise, not a win or a loss


@dataclass(frozen=True)
class Failure:
    """One reason a run failed; ``metric`` and ``case`` say what it is about when that applies.

    ``amount`` is how bad it is, in the units of what failed, to tell the worst of a metric's
    cut-offs: a floor's shortfall, a drop's paired mean drop, rank overlap's shortfall.
    """

    kind: str  # floor | drop | negative_leak | min_score | rank_overlap | coverage
    message: str
    metric: str | None = None
    case: str | None = None
    amount: float | None = None


@dataclass(frozen=True)
class Regression:
    """One case that scored worse on one metric than in the baseline."""

    case: str
    metric: str
    baseline: float
    current: float

    @property
    def delta(self) -> float:
        return self.current - self.baseline


@dataclass(frozen=True)
class Change:
    """One aggregate metric against the baseline.

    ``baseline``, ``current`` and ``delta`` are the runs' aggregates as measured (``delta`` is
    exactly ``current - baseline``); the paired statistics compare the cases answered in both.
    """

    metric: str
    baseline: float
    current: float
    delta: float
    paired_delta: float  # weighted mean of the per-case deltas of the paired cases
    p_value: float  # one-sided: evidence that current is below baseline
    ci: tuple[float, float]
    cases: int
    wins: int
    ties: int
    losses: int


# Cases that must drop on a deterministic target before its drop fails the run untested.
MIN_EXACT_CASES = 2


@dataclass(frozen=True)
class Policy:
    """What counts as failing: the suite's thresholds in plain numbers."""

    floors: Mapping[str, float] = field(default_factory=dict)
    max_drop: float = 0.02
    significance: float = 0.05
    min_rank_overlap: float | None = 0.7
    min_coverage: float = 0.9
    seed: int = 0
    # Judged relevant ids the index no longer holds (looked up in the run) that fail the run
    # whatever the significance test says; 0 turns the check off.
    lost_documents: int = 1


@dataclass(frozen=True)
class Verdict:
    outcome: RunOutcome
    failures: Sequence[Failure]
    regressions: Sequence[Regression]  # worst first
    changes: Mapping[str, Change]  # aggregate metric -> change; empty without a baseline


def compare_scores(
    current: RunScores,
    baseline: RunScores,
    seed: int = 0,
    only: Collection[str] | None = None,
) -> dict[str, Change]:
    """Every aggregate metric (or those in ``only``) against the baseline: delta and statistics.

    The delta is the difference of the two runs' aggregates. The paired statistics (mean
    delta, p-value, bootstrap CI, wins/ties/losses) cover the cases labelled and answered in
    both. Weights are the current suite's; the permutation test and the bootstrap are seeded,
    so the same runs always give the same p-values.
    """
    paired = sorted(set(current.per_case) & set(baseline.per_case))
    if not paired:
        return {}
    weights = [current.weights[c] for c in paired]
    total = sum(weights)
    names = [n for n in current.per_case[paired[0]] if only is None or aggregate_name(n) in only]
    # Rows (cases) and columns (metrics) are cut and turned by C-level calls, not per value in
    # Python: a 1,000-case suite has 21,000 of them, read several times each. The arithmetic
    # is the same, in the same order, so every figure is the same to the last bit.
    if not names:
        return {}
    before = [_row(baseline.per_case[c], names) for c in paired]
    after = [_row(current.per_case[c], names) for c in paired]
    deltas = [list(map(sub, row_a, row_b)) for row_a, row_b in zip(after, before, strict=True)]
    intervals = bootstrap_cis(deltas, weights, rounds=CI_ROUNDS, seed=seed, columns=len(names))
    turned = [zip(*rows, strict=True) for rows in (deltas, before, after)]  # rows to columns
    columns = zip(names, *turned, strict=True)
    changes: dict[str, Change] = {}
    for i, (name, column, column_before, column_after) in enumerate(columns):
        mean_before = sum(map(mul, weights, column_before)) / total
        mean_after = sum(map(mul, weights, column_after)) / total
        metric = aggregate_name(name)
        measured_before = baseline.metrics.get(metric, mean_before)
        measured_after = current.metrics.get(metric, mean_after)
        changes[metric] = Change(
            metric=metric,
            baseline=measured_before,
            current=measured_after,
            delta=measured_after - measured_before,
            paired_delta=mean_after - mean_before,
            p_value=permutation_test(column, weights, alternative="less", seed=seed),
            ci=intervals[i],
            cases=len(paired),
            wins=sum(map(_TIE.__lt__, column)),  # d > 1e-12
            ties=sum(map(_TIE.__ge__, map(abs, column))),  # |d| <= 1e-12
            losses=sum(map((-_TIE).__gt__, column)),  # d < -1e-12
        )
    return changes


def _row(metrics: Mapping[str, float], names: Sequence[str]) -> tuple[float, ...]:
    """The values of ``names`` in ``metrics``, in that order."""
    if len(names) == 1:
        return (metrics[names[0]],)
    row: tuple[float, ...] = itemgetter(*names)(metrics)
    return row


def case_regressions(current: RunScores, baseline: RunScores) -> list[Regression]:
    """Every (case, metric) that dropped against the baseline, worst drop first.

    A lower Judged@k is no regression: fewer of the results carry a label, which says the
    labels aged, not that the retriever got worse.
    """
    found = [
        Regression(case, name, before, current.per_case[case][name])
        for case in sorted(set(current.per_case) & set(baseline.per_case))
        for name, before in baseline.per_case[case].items()
        if name in current.per_case[case]
        and current.per_case[case][name] < before - 1e-12
        and not is_judged_share(name)
    ]
    return sorted(found, key=lambda r: (r.delta, r.case, r.metric))


def judge(
    current: RunScores,
    coverage: float,
    policy: Policy,
    baseline: RunScores | None = None,
    drift: Drift | None = None,
    noise_free: RunScores | None = None,
) -> Verdict:
    """The run's outcome and every reason for it.

    Low coverage makes the run ``unavailable`` and nothing else is judged: unanswered queries
    are an outage, never a quality drop. A drop against the baseline fails the run only when its
    paired mean is larger than ``max_drop`` *and* beyond noise: the paired permutation test says
    so, or the target is deterministic (every result in both runs kept its exact score) and at
    least ``MIN_EXACT_CASES`` cases dropped. Judged@k is compared like the others but never
    judged as a drop: it measures how far the labels reach, not the retriever.

    ``noise_free`` are the current run's scores with the reorderings that the target's own score
    jitter explains undone (``evaluation.evaluate`` passes them only while the scores did not
    drift). They are a second opinion for the verdict alone: a drop must also hold on them to
    fail the run. Measured values, deltas and regressed cases always come from ``current``.
    """
    changes = compare_scores(current, baseline, policy.seed) if baseline else {}
    regressions = case_regressions(current, baseline) if baseline else []
    if coverage < policy.min_coverage:
        failure = Failure(
            "coverage",
            f"coverage {coverage:.0%} is below min_coverage {policy.min_coverage:.0%}: "
            "the target did not answer enough queries to judge quality",
        )
        return Verdict("unavailable", [failure], regressions, changes)
    failures: list[Failure] = []
    for metric, floor in sorted(policy.floors.items()):
        value = current.metrics.get(metric)
        if value is not None and value < floor - 1e-12:
            failures.append(
                Failure(
                    "floor",
                    f"{metric} {value:.4f} is below the floor {floor:.4f}",
                    metric,
                    amount=floor - value,
                )
            )
    exact = drift is not None and drift.score_drift == 0.0
    second_regressions: list[Regression] | None = None
    for change in changes.values():
        if is_judged_share(change.metric):
            continue  # the labels' reach, not quality: reported, never a drop (see reasons)
        why = _beyond_noise(change, regressions, policy, exact)
        if why is None:
            continue
        if noise_free is not None and baseline is not None:
            # Asked only of a drop, so that a healthy run costs no second set of statistics.
            second = compare_scores(noise_free, baseline, policy.seed, only={change.metric})
            recheck = second.get(change.metric)
            if second_regressions is None:
                second_regressions = case_regressions(noise_free, baseline)
            if (
                recheck is not None
                and _beyond_noise(recheck, second_regressions, policy, exact) is None
            ):
                continue  # near-tied results swapped within the target's own score jitter
        failures.append(
            Failure(
                "drop",
                f"{change.metric} dropped {-change.paired_delta:.4f} over the cases answered in "
                f"both runs ({why}; {change.baseline:.4f} -> {change.current:.4f}), "
                f"more than max_drop {policy.max_drop:.4f}",
                change.metric,
                amount=-change.paired_delta,
            )
        )
    for check in current.checks:
        failures.append(Failure(check.kind, check.message, case=check.case))
    if (
        drift is not None
        and drift.rank_overlap is not None
        and policy.min_rank_overlap is not None
        and drift.rank_overlap < policy.min_rank_overlap - 1e-12
    ):
        failures.append(
            Failure(
                "rank_overlap",
                f"rank overlap {drift.rank_overlap:.3f} vs the baseline is below "
                f"min_rank_overlap {policy.min_rank_overlap:.3f}",
                amount=policy.min_rank_overlap - drift.rank_overlap,
            )
        )
    return Verdict("regression" if failures else "ok", failures, regressions, changes)


def _beyond_noise(
    change: Change, regressions: Sequence[Regression], policy: Policy, exact: bool
) -> str | None:
    """Why ``change`` is a drop beyond ``max_drop`` and beyond noise, or None when it is not.

    A target that gave every result it kept its baseline score to the last bit is deterministic:
    asking again would change nothing, so its cases that dropped are no sampling noise. The
    permutation test cannot see that; with fewer than 5 cases it can never reach p < 0.05. One
    case alone still does not fail the run.
    """
    if -change.paired_delta <= policy.max_drop + 1e-12:
        return None
    if change.p_value < policy.significance:
        return f"p={change.p_value:.4f}"
    dropped = sum(1 for r in regressions if aggregate_name(r.metric) == change.metric)
    if exact and dropped >= MIN_EXACT_CASES:
        return f"{dropped} cases, exact scores"
    return None
