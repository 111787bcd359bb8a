"""The run report (docs/report.md): one judged run as typed fields, built from its evaluation.

This is the one shape of a run after ``measure``: ``ragcanary run`` writes it, the daemon
adds its claim and stale labels, the store keeps it and gives it back, the exporter, the API,
the pages, the CLI and ``reports`` read it. Its JSON form lives in one module,
``measure.report_json`` (``marshal``/``unmarshal``); nothing else reads or writes the keys.

Plain frozen dataclasses, not pydantic: the report is built from values ``measure`` already
checked, and read back from JSON written by ragcanary or edited by hand, which the reader
tolerates rather than refuses (``--baseline FILE`` of an older version); a hand-written
reader also keeps what the JSON holds exactly (key order, a key left out vs ``null``), so a
stored report reads back and is answered byte for byte. ``measure`` imports no validation
library either.

A number that is not finite (NaN, infinity) is ``None`` here, as it is ``null`` in the JSON;
metric values and scores are never rounded, only the timings are.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from ragcanary.measure.absent import ABSENT as ABSENT
from ragcanary.measure.absent import Absent as Absent
from ragcanary.measure.cases import Suite
from ragcanary.measure.diagnosis import Diagnosis
from ragcanary.measure.endpoints import EndpointComparison
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.fingerprint import Fingerprint
from ragcanary.measure.lost_ids import LostId
from ragcanary.measure.results import ANSWERED, OUTCOMES, Answer, CaseResult, Outcome, RunResult
from ragcanary.measure.vector_text import decode_vector, encode_vector
from ragcanary.measure.verdict import Failure, Regression

Numbers = Mapping[str, float | None]  # metric name -> value (None: not finite)


@dataclass(frozen=True)
class BaselineComparison:
    """The comparison with the baseline run (the report's ``baseline``)."""

    run_id: str
    deltas: Numbers
    p_values: Numbers
    ci: Mapping[str, tuple[float | None, float | None]]
    win_tie_loss: Mapping[str, tuple[int, int, int]]
    rank_overlap: float | None = None
    score_drift: float | None = None
    score_drifted_ratio: float | None = None
    score_shift: float | None = None
    top_score_delta: float | None = None
    embedding_drift: float | None = None
    embedding_changed_ratio: float | None = None
    # (baseline's, this run's) vector length, set only when some case's length differs.
    embedding_dimensions: tuple[int, int] | None = None


@dataclass(frozen=True)
class Counts:
    """How many cases of each kind, and how their queries ended (the report's ``counts``)."""

    cases: int
    answered: int
    labelled: int
    negative: int
    label_free: int
    outcomes: Mapping[str, int]  # every query outcome, 0 included
    # Answered cases with fewer results than the suite's depth (ABSENT: a report older than it).
    short: int | Absent = ABSENT


@dataclass(frozen=True)
class CaseComparison:
    """One case's list against the baseline's (a case entry's ``vs_baseline``)."""

    rbo: float | None
    jaccard: float | None
    entered: tuple[str, ...]
    left: tuple[str, ...]
    top_score_delta: float | None
    # Each judged relevant id that left the top-k and why (None: a report older than that).
    lost: tuple[LostId, ...] | None = None


@dataclass(frozen=True)
class CaseEntry:
    """One case of the run: its query, what the target answered, its metrics."""

    id: str
    query: str
    kind: str  # labelled | negative | label_free
    outcome: str  # a query outcome (results.OUTCOMES)
    ids: tuple[str, ...]
    scores: tuple[float | None, ...]
    latency_s: float | None
    error: str | None
    metrics: Numbers
    vs_baseline: CaseComparison | None = None  # None: not answered in both runs
    # The cosine with the baseline's query vector; None for another length or a zero vector,
    # ABSENT when the two runs did not both embed the case.
    embedding_cosine: float | Absent | None = ABSENT
    query_vector: str | None = None  # base64 of little-endian float32 (vector_text)

    @property
    def answered(self) -> bool:
        return self.outcome in ANSWERED

    def vector(self) -> tuple[float, ...] | None:
        """The query vector the target was sent, or None."""
        return decode_vector(self.query_vector)


@dataclass(frozen=True)
class RunClaim:
    """The tick a replica claimed and ran (the report's ``claim``; PostgreSQL storage)."""

    job: str  # SUITE/TARGET
    tick: str  # ISO 8601, as every replica names it
    replica: str
    claimed: bool  # False: made while storage was down, the tick claimed when stored


@dataclass(frozen=True)
class Maintenance:
    """The declared change whose window the run was made in (the report's ``maintenance``)."""

    change_id: str
    kind: str  # reindex | embedding_model | config | deploy | other


@dataclass(frozen=True)
class ChangeVerdict:
    """A declared change judged on this run's pair (the report's ``change``): the first run
    after the change's window against the pair's last run before the change started, with
    the suite's verdict rules (``measure.change_verdict``)."""

    id: str  # the change's
    kind: str  # reindex | embedding_model | config | deploy | other
    verdict: str  # ok | regression | unavailable
    before_run_id: str | None  # the last run before the change; None: the pair had none
    diagnosis: Diagnosis  # of the comparison with the run before (only a cause and a line
    # when there was nothing to compare)
    reasons: tuple[str, ...] = ()  # why it failed, against the run before; empty for ok


@dataclass(frozen=True)
class StaleLabelEntry:
    """A relevant id that went stale (one of the report's ``stale_labels``)."""

    case: str
    id: str
    reason: str  # missing | not_returned
    looked_up_at: str | None = None  # missing only: when the index said so (ISO 8601)


@dataclass(frozen=True)
class IndexLookup:
    """When the target's index was asked about the suite's relevant ids (``index_lookup``)."""

    at: str | None  # when it last answered about every one (ISO 8601); None: it never could
    ids: int
    left: tuple[str, ...]  # relevant ids that left their canary's top-k in this run
    left_at: str | None  # when those were asked about


@dataclass(frozen=True)
class EndpointEntry:
    """One of the target's other endpoints against its url (one of the report's
    ``endpoints``)."""

    url: str  # without credentials, secrets masked
    asked: int  # the canaries the url answered, each sent to it once
    answered: int
    rbo_min: float | None  # None: it answered none
    rbo_mean: float | None
    diverged: tuple[str, ...]  # canaries it answered otherwise than the url (RBO under 1)
    unanswered: Mapping[str, int]  # query outcome -> count; only outcomes that occurred
    error: str | None  # the first unanswered query's reason


@dataclass(frozen=True)
class RunReport:
    """One run of one suite against one target, judged (docs/report.md)."""

    suite: str
    target: str
    run_id: str
    started_at: datetime
    duration_s: float | None
    outcome: str  # ok | regression | unavailable
    coverage: float | None
    metrics: Numbers
    metrics_by_tag: Mapping[str, Numbers]
    baseline: BaselineComparison | None
    failures: tuple[Failure, ...]
    regressions: tuple[Regression, ...]  # worst drop first; NaN where the JSON has null
    counts: Counts
    cases: tuple[CaseEntry, ...]
    # Added by the daemon: the tick it ran for (PostgreSQL), and on answered runs the stale
    # labels (None: it cannot tell; ABSENT: not looked for) and when the index was asked.
    claim: RunClaim | None = None
    stale_labels: tuple[StaleLabelEntry, ...] | Absent | None = ABSENT
    index_lookup: IndexLookup | None = None
    # Which layer broke, and the evidence (None: a report older than the diagnosis).
    diagnosis: Diagnosis | None = None
    # A target with endpoints: each by name against the url (ABSENT: it has none, or the
    # report is older than endpoints).
    endpoints: Mapping[str, EndpointEntry] | Absent = ABSENT
    # Added by the daemon: the change window the run was made in (None: outside any).
    maintenance: Maintenance | None = None
    # Added by the daemon: a declared change judged on the first run after its window.
    change: ChangeVerdict | None = None
    # What the run was made with (None: a report older than fingerprints).
    fingerprint: Fingerprint | None = None

    @property
    def pair(self) -> tuple[str, str]:
        return (self.suite, self.target)

    def unanswered(self) -> dict[str, int]:
        """How many queries went unanswered, by outcome; only outcomes that occurred."""
        return {
            outcome: count
            for outcome, count in self.counts.outcomes.items()
            if outcome not in ANSWERED and count > 0
        }

    def config_failure(self) -> str | None:
        """Why the run could not be read at all, when its config is to blame: the message of
        its ``config`` failure (the target answered, its response paths fit no answer)."""
        for failure in self.failures:
            if failure.kind == "config":
                return failure.message
        return None

    def finished_at(self) -> datetime:
        """When the run ended: its start plus its duration."""
        return self.started_at + _seconds(self.duration_s)


def _seconds(value: float | None) -> timedelta:
    return timedelta(seconds=value or 0.0)


def _num(value: float | None, digits: int | None = None) -> float | None:
    """A finite number (NaN/inf become None); rounded only where asked (timings).

    Metric values and scores are never rounded: the report must hold exactly what was
    served and exactly what trec_eval would compute.
    """
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits) if digits is not None else float(value)


def build_report(evaluation: Evaluation) -> RunReport:
    """The report of one evaluated run; the daemon adds its claim and stale labels."""
    run, scores, verdict, drift, vectors = (
        evaluation.run,
        evaluation.scores,
        evaluation.verdict,
        evaluation.drift,
        evaluation.embedding,
    )
    baseline = None
    if evaluation.baseline_run_id is not None:
        changes = verdict.changes
        baseline = BaselineComparison(
            run_id=evaluation.baseline_run_id,
            deltas={m: _num(c.delta) for m, c in changes.items()},
            p_values={m: _num(c.p_value) for m, c in changes.items()},
            ci={m: (_num(c.ci[0]), _num(c.ci[1])) for m, c in changes.items()},
            win_tie_loss={m: (c.wins, c.ties, c.losses) for m, c in changes.items()},
            rank_overlap=_num(drift.rank_overlap) if drift else None,
            score_drift=_num(drift.score_drift) if drift else None,
            score_drifted_ratio=_num(drift.score_drifted_ratio) if drift else None,
            score_shift=_num(drift.score_shift) if drift else None,
            top_score_delta=_num(drift.top_score_delta) if drift else None,
            # 1 - mean cosine of the query vectors with the baseline's (vector search only).
            embedding_drift=_num(vectors.drift) if vectors else None,
            embedding_changed_ratio=_num(vectors.changed_ratio) if vectors else None,
            embedding_dimensions=vectors.dimensions if vectors and vectors.dimensions else None,
        )
    outcomes = Counter(r.answer.outcome for r in run.results)
    kinds = Counter(r.case.kind for r in run.results)
    return RunReport(
        suite=run.suite,
        target=run.target,
        run_id=run.run_id,
        started_at=run.started_at,
        duration_s=_num(run.duration_s, 3),
        outcome=verdict.outcome,
        coverage=_num(run.coverage),
        metrics={m: _num(v) for m, v in scores.metrics.items()},
        metrics_by_tag={
            tag: {m: _num(v) for m, v in values.items()} for tag, values in scores.by_tag.items()
        },
        baseline=baseline,
        failures=tuple(
            Failure(f.kind, f.message, f.metric, f.case, _num(f.amount)) for f in verdict.failures
        ),
        regressions=tuple(verdict.regressions),
        counts=Counts(
            cases=len(run.results),
            answered=sum(r.answer.answered for r in run.results),
            labelled=kinds["labelled"],
            negative=kinds["negative"],
            label_free=kinds["label_free"],
            outcomes={o: outcomes[o] for o in OUTCOMES},
            short=len(evaluation.short.cases) if evaluation.short is not None else ABSENT,
        ),
        cases=tuple(_case_entry(r, evaluation) for r in run.results),
        diagnosis=evaluation.diagnosis,
        endpoints=_endpoints(evaluation.endpoints) if evaluation.endpoints else ABSENT,
        fingerprint=run.fingerprint,
    )


def _endpoints(compared: tuple[EndpointComparison, ...]) -> dict[str, EndpointEntry]:
    return {
        e.name: EndpointEntry(
            url=e.url,
            asked=e.asked,
            answered=e.answered,
            rbo_min=_num(e.rbo_min),
            rbo_mean=_num(e.rbo_mean),
            diverged=e.differing(),
            unanswered=dict(e.unanswered),
            error=e.error,
        )
        for e in compared
    }


def _case_entry(result: CaseResult, evaluation: Evaluation) -> CaseEntry:
    case, answer = result.case, result.answer
    comparison = evaluation.drift.per_case.get(case.id) if evaluation.drift else None
    vectors = evaluation.embedding
    cosine: float | Absent | None = ABSENT
    if vectors is not None and case.id in vectors.per_case:
        cosine = _num(vectors.per_case[case.id])
    return CaseEntry(
        id=case.id,
        query=case.query,
        kind=case.kind,
        outcome=answer.outcome,
        ids=tuple(answer.ids),
        scores=tuple(_num(s) for s in answer.scores),
        latency_s=_num(answer.latency_s, 4),
        error=answer.error,
        metrics={m: _num(v) for m, v in evaluation.scores.per_case.get(case.id, {}).items()},
        vs_baseline=None
        if comparison is None
        else CaseComparison(
            rbo=_num(comparison.rbo),
            jaccard=_num(comparison.jaccard),
            entered=tuple(e.id for e in comparison.entered),
            left=tuple(e.id for e in comparison.left),
            top_score_delta=_num(comparison.top1_delta),
            lost=evaluation.lost.get(case.id, ()),
        ),
        embedding_cosine=cosine,
        query_vector=encode_vector(result.vector) if result.vector is not None else None,
    )


def baseline_run(report: RunReport, suite: Suite) -> RunResult:
    """The baseline run held in ``report``, with the *current* suite's cases and labels.

    Rescoring the baseline's ids with today's labels means a fixed label changes both sides
    alike, so deltas only ever show what the retriever did. Cases the report lacks are left
    out (unpaired); cases the suite no longer has are ignored. A case keeps its stored query
    vector only while its query is the one the vector was made for.
    """
    results = []
    for entry in report.cases:
        case = suite.by_id.get(entry.id)
        if case is None:
            continue
        scores = entry.scores if len(entry.scores) == len(entry.ids) else (None,) * len(entry.ids)
        answer = Answer(entry.ids, scores, entry.latency_s or 0.0, _outcome(entry.outcome))
        # A vector is the embedding of the query it was made for: an edited query has none.
        vector = entry.vector() if entry.query == case.query else None
        results.append(CaseResult(case, answer, vector))
    return RunResult(
        suite=report.suite,
        target=report.target,
        run_id=report.run_id,
        started_at=report.started_at,
        duration_s=report.duration_s or 0.0,
        results=tuple(results),
    )


def _outcome(value: str) -> Outcome:
    for outcome in OUTCOMES:
        if outcome == value:
            return outcome
    return "bad_response"
