"""The report's reasons as people read them: the verdict's failures and what may explain them."""

from __future__ import annotations

from dataclasses import replace

from factories import answer, case, run

from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.run_report import RunReport, build_report
from ragcanary.measure.settings import Settings
from ragcanary.measure.verdict import Policy
from ragcanary.reports.report import reason_lines

SETTINGS = Settings(ks=(1, 3), depth=3, gain="linear", score_drift=0.03, policy=Policy())
CASES = [case(f"c{i}", {f"rel-{i}": 1, f"no-{i}": 0}) for i in range(8)]
# Scores far apart, so that no reordering passes for the target's own score jitter.
BASELINE = run(
    [(c, answer([f"rel-{i}", f"no-{i}"], [0.9, 0.5])) for i, c in enumerate(CASES)], "base"
)


def judged_run(first: str) -> RunReport:
    """Every canary's relevant id pushed to rank 2 under ``first`` (its id for canary i)."""
    now = run(
        [
            (c, answer([first.format(i=i), f"rel-{i}", f"no-{i}"], [0.95, 0.9, 0.5]))
            for i, c in enumerate(CASES)
        ],
        "now",
    )
    return build_report(evaluate(now, SETTINGS, BASELINE))


def test_a_drop_under_new_unjudged_ids_says_that_they_may_explain_it() -> None:
    """New unlabelled documents above the labelled ones: the drop fails, the note says why."""
    report = judged_run("new-{i}")
    assert report.outcome == "regression"
    assert report.metrics["judged@1"] == 0.0
    assert report.baseline is not None
    assert report.baseline.deltas["judged@1"] == -1.0
    assert (
        "judged@1 fell from 1.00 to 0.00: new unjudged documents may explain part of this drop"
        in reason_lines(report)
    )


def test_the_note_changes_nothing_of_the_verdict() -> None:
    """judged@k is never a failure nor a regression; the same drops fail with or without it."""
    unjudged, judged = judged_run("new-{i}"), judged_run("no-{i}")
    assert not any("judged" in (f.metric or "") for f in unjudged.failures)
    assert not any(r.metric.startswith("judged@") for r in unjudged.regressions)
    assert [f.metric for f in unjudged.failures if f.metric != "bpref"] == [
        f.metric for f in judged.failures if f.metric != "bpref"
    ]


def test_a_drop_under_judged_ids_has_no_note() -> None:
    """A labelled non-relevant id that outranks the relevant one is a plain drop."""
    report = judged_run("no-{i}")
    assert report.outcome == "regression"
    assert report.baseline is not None
    assert report.baseline.deltas["judged@1"] == 0.0
    assert not any("unjudged" in line for line in reason_lines(report))


def test_a_fall_of_judged_alone_passes_the_run() -> None:
    """Unlabelled ids in place of judged non-relevant ones lower judged@k and nothing else."""
    now = run(
        [(c, answer([f"rel-{i}", f"new-{i}"], [0.9, 0.5])) for i, c in enumerate(CASES)], "now"
    )
    # Half of each list changed: rank overlap is left out of this verdict to see the rest.
    overlap_off = replace(SETTINGS, policy=Policy(min_rank_overlap=None))
    report = build_report(evaluate(now, overlap_off, BASELINE))
    assert report.baseline is not None
    assert report.baseline.deltas["judged@3"] < -0.4
    assert (report.outcome, report.failures, report.regressions) == ("ok", (), ())
    assert reason_lines(report) == []
