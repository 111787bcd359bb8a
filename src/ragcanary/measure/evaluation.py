"""One run judged as a whole: scores, drift and verdict against an optional baseline run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ragcanary.measure.diagnosis import Diagnosis, diagnose
from ragcanary.measure.drift import Drift, align_run, compare_runs
from ragcanary.measure.endpoints import (
    DEFAULT_MIN_OVERLAP,
    EndpointComparison,
    EndpointRun,
    compare_endpoints,
)
from ragcanary.measure.lost_ids import IndexEvidence, LostId, Ranking, ann_recall, lost_ids
from ragcanary.measure.misread import Misread, misread
from ragcanary.measure.results import RunResult
from ragcanary.measure.scoring import RunScores, score_run
from ragcanary.measure.settings import Settings
from ragcanary.measure.short_results import ShortResults, short_results
from ragcanary.measure.vectors import EmbeddingDrift, compare_vectors
from ragcanary.measure.verdict import Failure, Verdict, judge


@dataclass(frozen=True)
class Evaluation:
    """Everything ragcanary concludes from one run; reports and metrics are rendered from it."""

    run: RunResult
    scores: RunScores
    verdict: Verdict
    drift: Drift | None = None
    baseline_run_id: str | None = None
    embedding: EmbeddingDrift | None = None  # query vectors vs the baseline's, when embedded
    # Set when the run is unavailable because the target's response paths fit none of its
    # answers: the config is wrong, the target is up (the verdict's one failure says so).
    misread: Misread | None = None
    # Per canary, the judged relevant ids that left its top-k and why; and the run's cause.
    lost: Mapping[str, tuple[LostId, ...]] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    # The canaries answered with fewer than ``depth`` results (None: not counted).
    short: ShortResults | None = None
    # A target with endpoints: each one's answers against the url's (empty: it has none).
    endpoints: tuple[EndpointComparison, ...] = ()


def evaluate(
    run: RunResult,
    settings: Settings,
    baseline: RunResult | None = None,
    evidence: IndexEvidence | None = None,
    endpoints: Sequence[EndpointRun] = (),
) -> Evaluation:
    """Score ``run`` as the target returned it, compare it with ``baseline``, and judge it.

    1. Score: per-case and aggregate metrics of the rankings exactly as returned.
    2. Compare: the baseline (scored with the same labels), the drift of ids and scores, and
       of the query vectors when the target searched by vector.
    3. Judge: floors, canary checks, and drops beyond ``max_drop`` and beyond noise.

    Noise tolerance lives in the verdict only. While the scores did not drift (their
    run-to-run spread stays within ``settings.score_drift``), a drop must also hold once the
    near-tie reorderings that this spread explains are undone (``drift.align_run``): an
    approximate index jittering against one baseline run then pages nobody. Once the scores
    themselves moved (a re-embedded or noisy index, a new model), no reordering is excused.
    Reported metrics, deltas and regressed cases are always those of the run as returned.

    4. Diagnose: why each judged relevant id left its canary's top-k, from ``evidence`` (what
       the index said of them in this run) and the query vectors; a judged relevant id the
       index no longer holds fails its canary and the run (``policy.lost_documents``);
       canaries answered with fewer than ``depth`` results, and shorter than in the baseline.
       The target's other ``endpoints``, asked the canaries ``run`` answered, are compared
       with it canary by canary; they are diagnosed, never judged.
    """
    evidence = evidence or IndexEvidence()
    compared = compare_endpoints(run, endpoints)
    ks, depth, gain, policy = settings.ks, settings.depth, settings.gain, settings.policy
    order = settings.score_order
    scores = score_run(run, ks, depth, gain, order)
    if baseline is None:
        verdict, found = _misread(run, judge(scores, run.coverage, policy))
        evaluation = Evaluation(run, scores, verdict, misread=found, endpoints=compared)
        return _diagnosed(evaluation, settings, evidence)
    baseline_scores = score_run(baseline, ks, depth, gain, order)
    drift = compare_runs(run, baseline, depth, settings.score_drift)
    aligned = align_run(run, baseline, drift.tie_tolerance(settings.score_drift), order)
    noise_free = None if aligned is run else score_run(aligned, ks, depth, gain, order)
    verdict = judge(scores, run.coverage, policy, baseline_scores, drift, noise_free)
    verdict, found = _misread(run, verdict)
    embedding = compare_vectors(run, baseline)
    evaluation = Evaluation(
        run, scores, verdict, drift, baseline.run_id, embedding, found, endpoints=compared
    )
    return _diagnosed(evaluation, settings, evidence, baseline)


def _diagnosed(
    evaluation: Evaluation,
    settings: Settings,
    evidence: IndexEvidence,
    baseline: RunResult | None = None,
) -> Evaluation:
    """``evaluation`` with each lost id's reason, the lost documents' failures, the short
    answers and its cause."""
    ranking = Ranking(settings.score_order, settings.depth, settings.score_drift)
    lost = lost_ids(evaluation.run, baseline, evidence, evaluation.embedding, ranking)
    short = short_results(evaluation.run, baseline, settings.depth)
    verdict = evaluation.verdict
    if verdict.outcome != "unavailable":
        verdict = _judge_lost(verdict, lost, evidence, settings.policy.lost_documents)
    diagnosis = diagnose(
        lost,
        outcome=verdict.outcome,
        misread=evaluation.misread is not None,
        evidence=evidence,
        embedding=evaluation.embedding,
        embedding_threshold=settings.embedding_drift,
        baseline=baseline is not None,
        score_drifted_ratio=evaluation.drift.score_drifted_ratio if evaluation.drift else None,
        short=short,
        endpoints=evaluation.endpoints,
        min_overlap=_min_overlap(settings),
    )
    recall = ann_recall(evaluation.run, baseline, lost, settings.depth)
    diagnosis = replace(diagnosis, ann_recall=recall)
    return replace(evaluation, verdict=verdict, lost=lost, diagnosis=diagnosis, short=short)


def _min_overlap(settings: Settings) -> float:
    """The RBO under which an endpoint diverges: the suite's ``min_rank_overlap``, or its
    default when the suite turned the check against the baseline off."""
    threshold = settings.policy.min_rank_overlap
    return DEFAULT_MIN_OVERLAP if threshold is None else threshold


def _judge_lost(
    verdict: Verdict,
    lost: Mapping[str, tuple[LostId, ...]],
    evidence: IndexEvidence,
    threshold: int,
) -> Verdict:
    """A failure per canary whose judged relevant ids left the index, once there are
    ``threshold`` such ids in the run (0: never): the index said so, no test is needed."""
    gone = {case: [i.id for i in ids if i.why == "not_in_index"] for case, ids in lost.items()}
    gone = {case: ids for case, ids in gone.items() if ids}
    if threshold <= 0 or sum(map(len, gone.values())) < threshold:
        return verdict
    at = f" (looked up {evidence.at.isoformat()})" if evidence.at else ""
    failures = [
        Failure(
            "lost_document",
            f"{case}: judged relevant {', '.join(ids)} left the index{at}; if deleted on "
            "purpose, remove them from the case's relevant ids or label their replacements",
            case=case,
            amount=float(len(ids)),
        )
        for case, ids in gone.items()
    ]
    return replace(verdict, outcome="regression", failures=[*verdict.failures, *failures])


def _misread(run: RunResult, verdict: Verdict) -> tuple[Verdict, Misread | None]:
    """An unavailable run whose answers its config misread keeps its outcome (nothing could be
    judged), with the config as its one failure instead of "did not answer enough queries"."""
    found = misread(run) if verdict.outcome == "unavailable" else None
    if found is None:
        return verdict, None
    return replace(verdict, failures=[Failure("config", str(found))]), found
