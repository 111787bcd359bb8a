"""A declared change's verdict on one pair, and what it does to the run that carries it.

The first run of a pair that starts once a change's window has closed is judged a second
time, against the pair's last run before the change started instead of its baseline, with the
suite's own verdict rules (``evaluation.evaluate``: the paired test, ``max_drop``, floors,
rank overlap, lost documents). That evaluation is the change's verdict: ``ok``,
``regression``, or ``unavailable`` when either run was unavailable or there was no run before
the change. A failing change verdict is a regression like any other: the run's outcome
becomes ``regression`` and its failures name the change (docs/report.md, ``change``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragcanary.measure.diagnosis import Diagnosis
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.run_report import ChangeVerdict, RunReport
from ragcanary.measure.verdict import Failure

# The failures that compare the run with the one before: the others (a floor, a negative
# canary's leak, a min_score, coverage) are the run's own and already among its failures.
RELATIVE = ("drop", "rank_overlap", "lost_document")
AGAINST = "against the last run before it"


@dataclass(frozen=True)
class JudgedChange:
    """A change's verdict and the failures it adds to the run."""

    verdict: ChangeVerdict
    failures: tuple[Failure, ...] = ()  # kind ``change``: what failed against the run before


def change_verdict(
    change_id: str,
    kind: str,
    before_run_id: str | None,
    before_outcome: str | None,
    after: RunReport,
    evaluation: Evaluation | None,
) -> JudgedChange:
    """The verdict of change ``change_id`` (of ``kind``) on ``after``'s pair.

    ``evaluation`` is ``after``'s run judged against the last run before the change
    (``before_run_id``, whose outcome was ``before_outcome``); None when there was nothing to
    judge: no run before, or either run unavailable.
    """

    def unavailable(said: Diagnosis) -> JudgedChange:
        return JudgedChange(ChangeVerdict(change_id, kind, "unavailable", before_run_id, said))

    if before_run_id is None:
        said = "no run of this pair before the change to compare with"
        return unavailable(Diagnosis("unknown", said))
    if after.outcome == "unavailable":  # the run's own diagnosis: an outage, or its config
        said = "the first run after the change was unavailable"
        return unavailable(after.diagnosis or Diagnosis("outage", said))
    if before_outcome == "unavailable" or evaluation is None:
        said = f"the last run before the change ({before_run_id}) was unavailable"
        return unavailable(Diagnosis("outage", said))
    outcome = evaluation.verdict.outcome
    diagnosis = evaluation.diagnosis
    failed = evaluation.verdict.failures if outcome != "ok" else ()
    shown = ChangeVerdict(
        change_id,
        kind,
        outcome,
        before_run_id,
        diagnosis if diagnosis is not None else Diagnosis("unknown", ""),
        tuple(_reason(f, evaluation) for f in failed),
    )
    prefix = f"change {change_id} ({kind}): "
    added = tuple(
        Failure("change", prefix + _reason(f, evaluation), f.metric, f.case, f.amount)
        for f in failed
        if f.kind in RELATIVE
    )
    return JudgedChange(shown, added)


def _reason(failure: Failure, evaluation: Evaluation) -> str:
    """One failure of the comparison with the run before, said against that run."""
    change = evaluation.verdict.changes.get(failure.metric or "")
    if failure.kind == "drop" and change is not None:
        return f"{failure.metric} {_value(change.baseline)} → {_value(change.current)} {AGAINST}"
    overlap = evaluation.drift.rank_overlap if evaluation.drift is not None else None
    if failure.kind == "rank_overlap" and overlap is not None and failure.amount is not None:
        floor = overlap + failure.amount
        return f"rank overlap {overlap:.3f} {AGAINST}, below min_rank_overlap {floor:.3f}"
    return failure.message


def _value(value: float) -> str:
    """A metric value as a reason line shows it: four decimals, trailing zeros dropped."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def with_change(report: RunReport, judged: JudgedChange) -> RunReport:
    """``report`` carrying the change's verdict; a regressing change fails the run.

    Each failure of the comparison that compares the two runs (a drop, rank overlap, a lost
    document) joins the run's failures as kind ``change``, its message naming the change.
    When the run had passed against its baseline, its outcome becomes ``regression`` and its
    diagnosis the comparison's, the one that says why it failed. A change that failed only on
    the run's own failures (a floor, a negative canary's leak) adds nothing: they are there.
    """
    report = replace(report, change=judged.verdict)
    if judged.verdict.verdict != "regression" or not judged.failures:
        return report
    diagnosis = report.diagnosis
    if report.outcome == "ok":
        diagnosis = judged.verdict.diagnosis
    return replace(
        report,
        outcome="regression",
        failures=(*report.failures, *judged.failures),
        diagnosis=diagnosis,
    )
