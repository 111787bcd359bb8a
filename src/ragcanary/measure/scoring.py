"""Scoring one run: per-case metrics, weighted aggregates overall and per tag, canary checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragcanary.measure.metrics import Gain, aggregate, case_metrics
from ragcanary.measure.results import CaseResult, RunResult, ScoreOrder


@dataclass(frozen=True)
class ScoreCheck:
    """A canary whose score crossed its own limit: a negative canary's leak or a poor top score.

    ``order`` says which side of the limit is the better one: for a distance (``asc``) a leak
    is a score at or *below* ``max_score`` and ``min_score`` bounds the top score from above.
    """

    case: str
    kind: str  # "negative_leak" | "min_score"
    score: float | None  # the offending score (None: nothing came back for a min_score canary)
    limit: float
    doc_id: str | None = None
    order: ScoreOrder = "desc"

    @property
    def message(self) -> str:
        distance = self.order == "asc"
        if self.kind == "negative_leak":
            side = "at or below" if distance else "at or above"
            return (
                f"negative canary {self.case}: {self.doc_id} scored {self.score:.4g}, "
                f"{side} max_score {self.limit:.4g}" + (" (a distance)" if distance else "")
            )
        got = "nothing came back" if self.score is None else f"top score is {self.score:.4g}"
        side = "above" if distance else "below"
        return f"canary {self.case}: {got}, {side} min_score {self.limit:.4g}" + (
            " (a distance)" if distance else ""
        )


@dataclass(frozen=True)
class RunScores:
    """Every number a run's answers give without a baseline."""

    per_case: Mapping[str, Mapping[str, float]]  # labelled and answered cases only
    weights: Mapping[str, float]  # case id -> weight, for the cases in per_case
    metrics: Mapping[str, float]
    by_tag: Mapping[str, Mapping[str, float]]
    checks: Sequence[ScoreCheck] = field(default_factory=tuple)


def score_case(result: CaseResult, ks: Sequence[int], depth: int, gain: Gain) -> dict[str, float]:
    """Metrics of one case, or ``{}`` when it is not labelled or went unanswered."""
    if result.case.kind != "labelled" or not result.answer.answered:
        return {}
    relevant = result.case.relevant
    assert relevant is not None  # a labelled case always has judgements
    return case_metrics(result.answer.ids, relevant, ks, depth, gain)


def check_scores(result: CaseResult, order: ScoreOrder = "desc") -> list[ScoreCheck]:
    """The negative-canary leaks and min_score violations of one answered case.

    ``order`` is the target's score direction: which side of a bound is the better one.
    """
    case, answer = result.case, result.answer
    if not answer.answered:
        return []

    def reaches(score: float, bound: float) -> bool:
        """``score`` is at ``bound`` or on its better side."""
        return score <= bound if order == "asc" else score >= bound

    checks = []
    if case.kind == "negative" and case.max_score is not None:
        for doc_id, score in zip(answer.ids, answer.scores, strict=True):
            if score is not None and reaches(score, case.max_score):
                checks.append(
                    ScoreCheck(case.id, "negative_leak", score, case.max_score, doc_id, order)
                )
                break
    if case.min_score is not None:
        top = answer.scores[0] if answer.scores else None
        if not answer.ids:
            checks.append(ScoreCheck(case.id, "min_score", None, case.min_score, order=order))
        elif top is not None and not reaches(top, case.min_score):
            checks.append(
                ScoreCheck(case.id, "min_score", top, case.min_score, answer.ids[0], order)
            )
    return checks


def score_run(
    run: RunResult,
    ks: Sequence[int],
    depth: int,
    gain: Gain = "linear",
    score_order: ScoreOrder = "desc",
) -> RunScores:
    """Score every case of ``run`` and aggregate them, weighted, overall and per tag."""
    per_case: dict[str, dict[str, float]] = {}
    weights: dict[str, float] = {}
    weighted: list[tuple[dict[str, float], float]] = []
    tagged: dict[str, list[tuple[dict[str, float], float]]] = {}
    checks: list[ScoreCheck] = []
    for result in run.results:
        checks.extend(check_scores(result, score_order))
        metrics = score_case(result, ks, depth, gain)
        if not metrics:
            continue
        per_case[result.case.id] = metrics
        weights[result.case.id] = result.case.weight
        weighted.append((metrics, result.case.weight))
        for tag in result.case.tags:
            tagged.setdefault(tag, []).append((metrics, result.case.weight))
    return RunScores(
        per_case=per_case,
        weights=weights,
        metrics=aggregate(weighted),
        by_tag={tag: aggregate(items) for tag, items in sorted(tagged.items())},
        checks=tuple(checks),
    )
