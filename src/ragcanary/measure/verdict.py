"""Deciding a run's outcome: floors, significant drops vs the baseline, canary checks, coverage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ragcanary.measure.drift import Drift
from ragcanary.measure.metrics import aggregate_name
from ragcanary.measure.scoring import RunScores
from ragcanary.measure.stats import bootstrap_cis, permutation_test

RunOutcome = Literal["ok", "regression", "unavailable"]


@dataclass(frozen=True)
class Failure:
    """One reason a run failed; ``metric`` and ``case`` say what it is about when that applies."""

    kind: str  # floor | drop | negative_leak | min_score | rank_overlap | coverage
    message: str
    metric: str | None = None
    case: str | None = None


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
    """One aggregate metric against the baseline, over the cases answered in both runs."""

    metric: str
    baseline: float
    current: float
    delta: float
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


@dataclass(frozen=True)
class Verdict:
    outcome: RunOutcome
    failures: Sequence[Failure]
    regressions: Sequence[Regression]  # worst first
    changes: Mapping[str, Change]  # aggregate metric -> change; empty without a baseline


def compare_scores(current: RunScores, baseline: RunScores, seed: int = 0) -> dict[str, Change]:
    """Paired comparison of every aggregate metric over the cases labelled and answered in both.

    Weights are the current suite's; the permutation test and the bootstrap are seeded, so the
    same runs always give the same p-values.
    """
    paired = sorted(set(current.per_case) & set(baseline.per_case))
    if not paired:
        return {}
    weights = [current.weights[c] for c in paired]
    total = sum(weights)
    names = list(current.per_case[paired[0]])
    before = [[baseline.per_case[c][n] for n in names] for c in paired]
    after = [[current.per_case[c][n] for n in names] for c in paired]
    deltas = [
        [a - b for a, b in zip(row_a, row_b, strict=True)]
        for row_a, row_b in zip(after, before, strict=True)
    ]
    intervals = bootstrap_cis(deltas, weights, seed=seed, columns=len(names))
    changes: dict[str, Change] = {}
    for i, name in enumerate(names):
        column = [row[i] for row in deltas]
        mean_before = sum(w * row[i] for w, row in zip(weights, before, strict=True)) / total
        mean_after = sum(w * row[i] for w, row in zip(weights, after, strict=True)) / total
        metric = aggregate_name(name)
        changes[metric] = Change(
            metric=metric,
            baseline=mean_before,
            current=mean_after,
            delta=mean_after - mean_before,
            p_value=permutation_test(column, weights, alternative="less", seed=seed),
            ci=intervals[i],
            cases=len(paired),
            wins=sum(d > 1e-12 for d in column),
            ties=sum(abs(d) <= 1e-12 for d in column),
            losses=sum(d < -1e-12 for d in column),
        )
    return changes


def case_regressions(current: RunScores, baseline: RunScores) -> list[Regression]:
    """Every (case, metric) that dropped against the baseline, worst drop first."""
    found = [
        Regression(case, name, before, current.per_case[case][name])
        for case in sorted(set(current.per_case) & set(baseline.per_case))
        for name, before in baseline.per_case[case].items()
        if name in current.per_case[case] and current.per_case[case][name] < before - 1e-12
    ]
    return sorted(found, key=lambda r: (r.delta, r.case, r.metric))


def judge(
    current: RunScores,
    coverage: float,
    policy: Policy,
    baseline: RunScores | None = None,
    drift: Drift | None = None,
    compared: RunScores | None = None,
) -> Verdict:
    """The run's outcome and every reason for it.

    Low coverage makes the run ``unavailable`` and nothing else is judged: unanswered queries
    are an outage, never a quality drop. A drop against the baseline fails the run only when it
    is larger than ``max_drop`` *and* beyond noise: the paired permutation test says so, or the
    target is deterministic (every result in both runs kept its exact score) and at least
    ``MIN_EXACT_CASES`` cases dropped.
    ``compared`` are the current run's scores as compared with the baseline (by default
    ``current``; ``evaluate`` passes them with noise-explained reorderings undone); floors and
    canary checks always judge ``current``.
    """
    paired = current if compared is None else compared
    changes = compare_scores(paired, baseline, policy.seed) if baseline else {}
    regressions = case_regressions(paired, baseline) if baseline else []
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
                Failure("floor", f"{metric} {value:.4f} is below the floor {floor:.4f}", metric)
            )
    exact = drift is not None and drift.score_drift == 0.0
    for change in changes.values():
        if -change.delta <= policy.max_drop + 1e-12:
            continue
        significant = change.p_value < policy.significance
        # A target that gave every result it kept its baseline score to the last bit is
        # deterministic: asking again would change nothing, so its cases that dropped are no
        # sampling noise. The permutation test cannot see that; with fewer than 5 cases it can
        # never reach p < 0.05. One case alone still does not fail the run.
        dropped = sum(1 for r in regressions if aggregate_name(r.metric) == change.metric)
        if significant or (exact and dropped >= MIN_EXACT_CASES):
            why = f"p={change.p_value:.4f}" if significant else f"{dropped} cases, exact scores"
            failures.append(
                Failure(
                    "drop",
                    f"{change.metric} dropped {-change.delta:.4f} "
                    f"({change.baseline:.4f} -> {change.current:.4f}, {why}), "
                    f"more than max_drop {policy.max_drop:.4f}",
                    change.metric,
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
            )
        )
    return Verdict("regression" if failures else "ok", failures, regressions, changes)
