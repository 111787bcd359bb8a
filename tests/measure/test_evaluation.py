"""evaluate(): measured as returned; near-tie swaps within the score jitter do not fail the run."""

from __future__ import annotations

import pytest
from factories import answer, case, run
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.drift import compare_runs
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import build_report
from ragcanary.suites.judge import settings_for

SUITE = SuiteConfig(cases="suite.yaml", targets=["search"])
CASES = [case(f"c{i}", [f"rel{i}"]) for i in range(40)]


def _run(swapped: range, lost: range = range(0), jitter: float = 0.0) -> RunResult:
    """Each case: its relevant doc first at 0.800, a near-tied other at 0.798, then the rest.

    ``swapped`` cases return the near-tied pair the other way round, ``lost`` cases lost their
    relevant document, and every score moves by ``jitter`` (alternating sign) like ANN noise.
    """
    pairs = []
    for i, c in enumerate(CASES):
        ids = [f"rel{i}", f"near{i}", *(f"x{i}-{j}" for j in range(8))]
        scores = [0.8, 0.798, *(0.7 - 0.02 * j for j in range(8))]
        if i in swapped:
            ids[0], ids[1] = ids[1], ids[0]
            scores[0], scores[1] = 0.799, 0.7985
        if i in lost:
            ids, scores = ids[1:], scores[1:]
        sign = 1 if i % 2 else -1
        pairs.append((c, answer(ids, [s + sign * jitter for s in scores])))
    return run(pairs)


def test_near_tie_swaps_in_many_cases_are_not_a_regression() -> None:
    baseline = _run(swapped=range(0))
    current = _run(swapped=range(20), jitter=0.002)
    evaluation = evaluate(current, settings_for(SUITE), baseline)
    assert evaluation.scores.metrics["hit_rate@1"] == 0.5  # reported as the target answered
    assert evaluation.verdict.outcome == "ok"
    # Deltas and regressed cases are measured on the lists as returned; only the verdict
    # excuses swaps within the scores' own jitter.
    assert evaluation.verdict.changes["hit_rate@1"].delta == -0.5
    assert {r.case for r in evaluation.verdict.regressions} == {f"c{i}" for i in range(20)}


def test_swaps_wider_than_the_score_noise_still_count() -> None:
    baseline = _run(swapped=range(0))
    current = _run(swapped=range(20))  # no jitter: the swapped scores are the only moves
    wide = [
        (c, answer([f"near{i}", f"rel{i}"], [0.9, 0.7]) if i < 20 else a.answer)
        for i, (c, a) in enumerate(zip(CASES, current.results, strict=True))
    ]
    evaluation = evaluate(run(wide), settings_for(SUITE), baseline)
    assert evaluation.verdict.outcome == "regression"
    assert "hit_rate@1" in {f.metric for f in evaluation.verdict.failures}


def test_lost_relevant_documents_are_a_regression_despite_the_noise() -> None:
    baseline = _run(swapped=range(0))
    current = _run(swapped=range(10, 30), lost=range(5), jitter=0.002)
    evaluation = evaluate(current, settings_for(SUITE), baseline)
    assert evaluation.verdict.outcome == "regression"
    assert evaluation.verdict.changes["hit_rate@5"].delta == -5 / 40
    lost = {r.case for r in evaluation.verdict.regressions if r.metric == "hit_rate@5"}
    assert lost == {f"c{i}" for i in range(5)}
    assert "hit_rate@5" in {f.metric for f in evaluation.verdict.failures if f.kind == "drop"}


def test_score_noise_ignores_a_shift_that_moves_every_score_alike() -> None:
    baseline = _run(swapped=range(0))
    shifted = run(
        [
            (c, answer(r.answer.ids, [s - 0.05 for s in r.answer.scores]))
            for c, r in zip(CASES, baseline.results, strict=True)
        ]
    )
    drift = compare_runs(shifted, baseline, 10, 0.05)
    assert drift.score_noise is not None
    assert drift.score_noise < 1e-9
    assert drift.tie_tolerance(0.05) < 1e-8
    jittered = compare_runs(_run(swapped=range(0), jitter=0.002), baseline, 10, 0.05)
    assert jittered.score_noise is not None
    assert 0.002 < jittered.tie_tolerance(0.05) < 0.01
    assert jittered.tie_tolerance(0.003) == 0.006  # capped at twice score_drift
    # A spread wider than score_drift is drift, not jitter: no reordering is excused.
    assert jittered.tie_tolerance(0.002) == 0.0


def test_index_noise_wider_than_score_drift_is_judged_as_returned() -> None:
    """Every score moved by up to 0.05 and the near-tied pairs swapped: a real drop."""
    baseline = _run(swapped=range(0))
    current = _run(swapped=range(20), jitter=0.05)
    evaluation = evaluate(current, settings_for(SUITE), baseline)
    assert evaluation.drift is not None
    assert evaluation.drift.tie_tolerance(SUITE.thresholds.score_drift) == 0.0
    assert evaluation.verdict.outcome == "regression"
    assert "mrr" in {f.metric for f in evaluation.verdict.failures if f.kind == "drop"}


DOCS = [f"d{i}" for i in range(8)]
_ranking = st.lists(st.sampled_from(DOCS), max_size=8, unique=True)
_scores = st.lists(st.floats(0, 1), min_size=8, max_size=8)
_answered = st.booleans()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_ranking, _scores, _answered, _ranking, _scores, _answered),
        min_size=1,
        max_size=12,
    )
)
def test_report_deltas_are_exactly_current_minus_baseline(cases) -> None:
    """Whatever the two runs answered (unanswered cases included), delta = metric difference."""
    labelled = [case(f"c{i}", ["d0", "d3"]) for i in range(len(cases))]
    before, after = [], []
    for c, (ids_b, sc_b, ok_b, ids_a, sc_a, ok_a) in zip(labelled, cases, strict=True):
        before.append(
            (
                c,
                answer(ids_b, sorted(sc_b, reverse=True)[: len(ids_b)])
                if ok_b
                else answer([], outcome="timeout"),
            )
        )
        after.append(
            (
                c,
                answer(ids_a, sorted(sc_a, reverse=True)[: len(ids_a)])
                if ok_a
                else answer([], outcome="timeout"),
            )
        )
    suite = SuiteConfig(cases="suite.yaml", targets=["search"], min_coverage=0.0)
    baseline = evaluate(run(before, "base"), settings_for(suite))
    current = build_report(evaluate(run(after), settings_for(suite), run(before, "base")))
    expected = baseline.scores.metrics
    assert current.baseline is not None
    for metric, delta in current.baseline.deltas.items():
        now = current.metrics[metric]
        assert delta is not None
        assert now is not None
        assert abs(delta - (now - expected[metric])) <= 1e-12
    shared = set(current.metrics) & set(expected)
    if current.baseline.deltas:
        assert set(current.baseline.deltas) == shared


def test_score_shift_keeps_the_sign_that_score_drift_drops() -> None:
    baseline = _run(swapped=range(0))
    lowered = run(
        [
            (c, answer(r.answer.ids, [s - 0.05 for s in r.answer.scores]))
            for c, r in zip(CASES, baseline.results, strict=True)
        ]
    )
    report = build_report(evaluate(lowered, settings_for(SUITE), baseline))
    assert report.baseline is not None
    assert report.baseline.score_drift == pytest.approx(0.05)
    assert report.baseline.score_shift == pytest.approx(-0.05)
