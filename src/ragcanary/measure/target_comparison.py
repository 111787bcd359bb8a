"""Several targets on one suite against a reference: metrics, deltas, p-values, Holm's correction.

``ragcanary compare`` asks every target the suite once and judges each candidate with the
reference's run as its baseline, exactly as the two-target A/B always did
(``evaluation.evaluate``): the p-value of a metric is the verdict's one-sided paired
permutation test that the candidate is below the reference. With several candidates, each
metric is tested once per candidate, so the p-values of one metric (in one scope: the whole
suite, or one tag's canaries) are one family, corrected with Holm-Bonferroni (``stats.holm``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.scoring import RunScores
from ragcanary.measure.stats import holm
from ragcanary.measure.verdict import Change, Policy, compare_scores

CORRECTION = "holm"
MIN_TARGETS, MAX_TARGETS = 2, 10


@dataclass(frozen=True)
class Figures:
    """One target's numbers in one scope: the whole suite, or the canaries of one tag.

    The reference has ``metrics`` only. A candidate also has, per metric, its difference to
    the reference (``deltas``, candidate minus reference), the one-sided p-value that it is
    lower (``p_values``), that p-value corrected over the candidates (``p_values_corrected``),
    and the metrics whose corrected p-value is below the suite's significance
    (``significant``: significantly lower than the reference's).
    """

    metrics: Mapping[str, float]
    deltas: Mapping[str, float] = field(default_factory=dict)
    p_values: Mapping[str, float] = field(default_factory=dict)
    p_values_corrected: Mapping[str, float] = field(default_factory=dict)
    significant: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetResult:
    """One target of the comparison: its run, coverage, latency and figures."""

    name: str
    run_id: str
    is_reference: bool
    coverage: float
    latency_p50_s: float | None  # over the answered queries; None: none was answered
    latency_p95_s: float | None
    suite: Figures
    tags: Mapping[str, Figures]
    # The metrics whose drop makes this candidate significantly worse than the reference
    # (``worse_metrics``); always empty for the reference.
    worse: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetComparison:
    """Every target of one suite against the reference: what ``compare`` prints and writes."""

    suite: str
    reference: str
    significance: float
    targets: tuple[TargetResult, ...]  # the reference first, then the candidates as given
    tags: tuple[str, ...]
    correction: str = CORRECTION

    @property
    def candidates(self) -> tuple[TargetResult, ...]:
        return tuple(t for t in self.targets if not t.is_reference)

    def worse_targets(self) -> list[str]:
        """The candidates significantly worse than the reference, in the order given."""
        return [t.name for t in self.candidates if t.worse]


def latency_quantile(latencies: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``latencies`` by linear interpolation between order statistics
    (numpy's default method); None for no values."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q}")
    ordered = sorted(latencies)
    if not ordered:
        return None
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def worse_metrics(
    drops: Sequence[str], corrected: Mapping[str, float], significance: float, candidates: int
) -> tuple[str, ...]:
    """The metrics that make a candidate significantly worse than the reference.

    ``drops`` are the metrics of the candidate's verdict "drop" failures against the
    reference (a paired drop beyond ``max_drop`` and beyond noise). With one candidate that
    verdict decides alone, as the two-target compare always did; with several, a drop counts
    only while its Holm-corrected p-value stays below ``significance``.
    """
    if candidates <= 1:
        return tuple(dict.fromkeys(drops))
    return tuple(m for m in dict.fromkeys(drops) if corrected.get(m, 1.0) < significance)


def compare_evaluations(
    reference: Evaluation, candidates: Sequence[Evaluation], policy: Policy
) -> TargetComparison:
    """``reference`` and each candidate (evaluated with the reference's run as its baseline)
    side by side, p-values Holm-corrected per metric over the candidates."""
    tags = tuple(sorted({t for e in (reference, *candidates) for t in e.scores.by_tag}))
    overall = [_figures(c.verdict.changes, c.scores.metrics) for c in candidates]
    overall = _corrected(overall, policy.significance)
    by_tag: list[dict[str, Figures]] = [{} for _ in candidates]
    for tag in tags:
        before = _tagged(reference, tag)
        scoped = [
            _figures(
                compare_scores(_tagged(c, tag), before, policy.seed), c.scores.by_tag.get(tag, {})
            )
            for c in candidates
        ]
        for i, figures in enumerate(_corrected(scoped, policy.significance)):
            by_tag[i][tag] = figures
    results = [
        _result(reference, Figures(reference.scores.metrics), _reference_tags(reference, tags))
    ]
    for i, candidate in enumerate(candidates):
        drops = [f.metric for f in candidate.verdict.failures if f.kind == "drop" and f.metric]
        worse = worse_metrics(
            drops, overall[i].p_values_corrected, policy.significance, len(candidates)
        )
        results.append(_result(candidate, overall[i], by_tag[i], worse))
    return TargetComparison(
        suite=reference.run.suite,
        reference=reference.run.target,
        significance=policy.significance,
        targets=tuple(results),
        tags=tags,
    )


def _result(
    evaluation: Evaluation,
    suite: Figures,
    tags: Mapping[str, Figures],
    worse: tuple[str, ...] | None = None,
) -> TargetResult:
    run = evaluation.run
    latencies = [r.answer.latency_s for r in run.results if r.answer.answered]
    return TargetResult(
        name=run.target,
        run_id=run.run_id,
        is_reference=worse is None,
        coverage=run.coverage,
        latency_p50_s=latency_quantile(latencies, 0.5),
        latency_p95_s=latency_quantile(latencies, 0.95),
        suite=suite,
        tags=tags,
        worse=worse or (),
    )


def _reference_tags(reference: Evaluation, tags: Sequence[str]) -> dict[str, Figures]:
    return {tag: Figures(reference.scores.by_tag.get(tag, {})) for tag in tags}


def _figures(changes: Mapping[str, Change], metrics: Mapping[str, float]) -> Figures:
    return Figures(
        metrics=metrics,
        deltas={m: c.delta for m, c in changes.items()},
        p_values={m: c.p_value for m, c in changes.items()},
    )


def _corrected(figures: Sequence[Figures], significance: float) -> list[Figures]:
    """``figures`` (one per candidate, in one scope) with each metric's p-values corrected
    as one family over the candidates that have it, and their significant metrics."""
    corrected: list[dict[str, float]] = [{} for _ in figures]
    metrics = dict.fromkeys(m for f in figures for m in f.p_values)
    for metric in metrics:
        having = [i for i, f in enumerate(figures) if metric in f.p_values]
        adjusted = holm([figures[i].p_values[metric] for i in having])
        for i, value in zip(having, adjusted, strict=True):
            corrected[i][metric] = value
    return [
        Figures(
            metrics=f.metrics,
            deltas=f.deltas,
            p_values=f.p_values,
            p_values_corrected=c,
            significant=tuple(m for m, p in c.items() if p < significance),
        )
        for f, c in zip(figures, corrected, strict=True)
    ]


def _tagged(evaluation: Evaluation, tag: str) -> RunScores:
    """The scores of ``evaluation``'s canaries that carry ``tag``, with the tag's aggregates."""
    scores = evaluation.scores
    cases = {r.case.id for r in evaluation.run.results if tag in r.case.tags}
    per_case = {c: m for c, m in scores.per_case.items() if c in cases}
    return RunScores(
        per_case=per_case,
        weights={c: scores.weights[c] for c in per_case},
        metrics=scores.by_tag.get(tag, {}),
        by_tag={},
    )
