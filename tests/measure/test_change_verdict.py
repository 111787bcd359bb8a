"""A change's verdict: the first run after it against the last run before it, with the suite's
own rules; a regressing change fails a run that passed against its baseline."""

from __future__ import annotations

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.change_verdict import change_verdict, with_change
from ragcanary.measure.evaluation import Evaluation, evaluate
from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import RunReport, build_report
from ragcanary.suites.judge import settings_for

SUITE = SuiteConfig(cases="suite.yaml", targets=["search"], k=[5])
CASES = [case(f"c{i}", [f"rel{i}"]) for i in range(20)]
CHANGE = "chg-20261122-120000-a1b2c3"


def _run(lost: int = 0, run_id: str = "after", outage: bool = False) -> RunResult:
    """Every case finds its relevant id first, but the first ``lost`` cases lost it."""
    pairs = []
    for i, c in enumerate(CASES):
        ids = [f"x{i}-{j}" for j in range(10)] if i < lost else [f"rel{i}"]
        ids += [f"x{i}-{j}" for j in range(10 - len(ids))]
        pairs.append((c, answer((), outcome="timeout") if outage else answer(ids)))
    return run(pairs, run_id)


def _judged(after: RunResult, against: RunResult) -> tuple[RunReport, Evaluation]:
    """``after``'s report against a baseline equal to it, and ``after`` against ``against``."""
    settings = settings_for(SUITE)
    report = build_report(evaluate(after, settings, after))
    return report, evaluate(after, settings, against)


def test_a_change_that_kept_quality_is_ok_and_leaves_the_run_as_it_was() -> None:
    report, evaluation = _judged(_run(), _run(run_id="before"))
    judged = change_verdict(CHANGE, "reindex", "before", "ok", report, evaluation)
    assert (judged.verdict.verdict, judged.verdict.diagnosis.cause) == ("ok", "none")
    assert (judged.verdict.reasons, judged.failures) == ((), ())
    carried = with_change(report, judged)
    assert carried.outcome == "ok"
    assert carried.failures == report.failures
    assert carried.change == judged.verdict


def test_a_change_that_dropped_quality_fails_a_run_that_passed_its_baseline() -> None:
    # The baseline is the run itself (re-pinned after the drop, say): it passes that.
    report, evaluation = _judged(_run(lost=12), _run(run_id="before"))
    assert report.outcome == "ok"
    judged = change_verdict(CHANGE, "reindex", "before", "ok", report, evaluation)
    assert judged.verdict.verdict == "regression"
    assert judged.verdict.before_run_id == "before"
    assert "hit_rate@5 1 → 0.4 against the last run before it" in judged.verdict.reasons
    carried = with_change(report, judged)
    assert carried.outcome == "regression"
    lines = [f.message for f in carried.failures if f.kind == "change"]
    assert f"change {CHANGE} (reindex): hit_rate@5 1 → 0.4 against the last run before it" in (
        lines
    )
    assert all(line.startswith(f"change {CHANGE} (reindex): ") for line in lines)
    # The run's diagnosis becomes the comparison's: the one that explains its failure.
    assert carried.diagnosis is not None
    assert carried.diagnosis.cause != "none"
    assert carried.diagnosis == judged.verdict.diagnosis


def test_a_run_already_regressed_keeps_its_diagnosis_and_gains_the_change_reasons() -> None:
    settings = settings_for(SUITE)
    after = _run(lost=12)
    report = build_report(evaluate(after, settings, _run(run_id="pinned")))
    evaluation = evaluate(after, settings, _run(run_id="before"))
    judged = change_verdict(CHANGE, "deploy", "before", "ok", report, evaluation)
    carried = with_change(report, judged)
    assert carried.outcome == "regression"
    assert carried.diagnosis == report.diagnosis
    assert len(carried.failures) > len(report.failures)


@pytest.mark.parametrize(
    ("before_id", "before_outcome", "after_outage", "cause", "summary"),
    [
        (None, None, False, "unknown", "no run of this pair before the change"),
        ("before", "unavailable", False, "outage", "the last run before the change (before)"),
        ("before", "ok", True, "outage", "too few canaries were answered"),
    ],
)
def test_a_change_with_a_side_missing_or_unavailable_is_unavailable(
    before_id: str | None, before_outcome: str | None, after_outage: bool, cause: str, summary: str
) -> None:
    after = _run(outage=after_outage)
    report = build_report(evaluate(after, settings_for(SUITE)))
    judged = change_verdict(CHANGE, "config", before_id, before_outcome, report, None)
    assert judged.verdict.verdict == "unavailable"
    assert judged.verdict.diagnosis.cause == cause
    assert judged.verdict.diagnosis.summary.startswith(summary)
    carried = with_change(report, judged)
    assert carried.outcome == report.outcome  # an unavailable change fails nothing
    assert carried.change == judged.verdict


def test_the_change_survives_the_report_json() -> None:
    report, evaluation = _judged(_run(lost=12), _run(run_id="before"))
    carried = with_change(
        report, change_verdict(CHANGE, "reindex", "before", "ok", report, evaluation)
    )
    data = marshal(carried)
    assert data["change"]["id"] == CHANGE
    assert data["change"]["verdict"] == "regression"
    assert data["change"]["diagnosis"]["cause"] == carried.diagnosis.cause  # type: ignore[union-attr]
    assert unmarshal(data) == carried
    assert marshal(unmarshal(data)) == data
    data.pop("change")
    assert unmarshal(data).change is None  # a report without one reads back without one
