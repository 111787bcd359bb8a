"""The verdict: floors, significant drops, canary checks, rank overlap and coverage."""

from __future__ import annotations

from factories import answer, case, run

from ragcanary.measure.drift import compare_runs
from ragcanary.measure.results import RunResult
from ragcanary.measure.scoring import score_run
from ragcanary.measure.verdict import Policy, Verdict, judge

CASES = [case(f"c{i}", [f"d{i}"]) for i in range(40)]


def _scores(hits: int, total: int = 40, ids_for_miss: str = "other") -> RunResult:
    pairs = [
        (c, answer([f"d{i}"] if i < hits else [ids_for_miss])) for i, c in enumerate(CASES[:total])
    ]
    return run(pairs)


def _judge(current_hits: int, baseline_hits: int | None, policy: Policy | None = None) -> Verdict:
    policy = policy or Policy()
    current = _scores(current_hits)
    scored = score_run(current, ks=[5], depth=10)
    if baseline_hits is None:
        return judge(scored, current.coverage, policy)
    base = _scores(baseline_hits)
    return judge(
        scored,
        current.coverage,
        policy,
        score_run(base, ks=[5], depth=10),
        compare_runs(current, base, 10, 0.05),
    )


def test_unchanged_run_passes_against_its_baseline() -> None:
    verdict = _judge(30, 30)
    assert verdict.outcome == "ok"
    assert verdict.failures == []
    assert verdict.changes["hit_rate@5"].delta == 0.0


def test_large_consistent_drop_is_a_regression_with_cases_worst_first() -> None:
    verdict = _judge(10, 30)
    assert verdict.outcome == "regression"
    (drop,) = [f for f in verdict.failures if f.kind == "drop" and f.metric == "hit_rate@5"]
    assert "dropped 0.5000" in drop.message
    assert verdict.changes["hit_rate@5"].p_value < 0.001
    assert {r.case for r in verdict.regressions} == {f"c{i}" for i in range(10, 30)}
    assert verdict.regressions[0].delta == -1.0


def test_one_case_dropping_is_noise_not_a_regression() -> None:
    """With no floor broken, a single canary flipping must not page anyone."""
    verdict = _judge(29, 30, Policy(min_rank_overlap=None))
    assert verdict.outcome == "ok"
    assert [r.case for r in verdict.regressions if r.metric == "hit_rate@5"] == ["c29"]
    assert verdict.changes["hit_rate@5"].p_value >= 0.4


def test_two_cases_dropping_on_a_deterministic_target_is_a_regression() -> None:
    """Every kept result has its exact baseline score: the drop is no noise, untested or not."""
    verdict = _judge(28, 30, Policy(min_rank_overlap=None))
    assert verdict.changes["hit_rate@5"].p_value >= 0.05  # too few cases for the test
    assert verdict.outcome == "regression"
    (drop,) = [f for f in verdict.failures if f.kind == "drop" and f.metric == "hit_rate@5"]
    assert "2 cases, exact scores" in drop.message


def test_two_cases_dropping_on_a_jittering_target_need_significance() -> None:
    """Once kept results' scores move at all, a drop too small to test is not a regression."""
    base = _scores(30)
    jittered = [
        (r.case, answer(r.answer.ids, [s + 0.001 * (i % 3) for s in r.answer.scores]))
        for i, r in enumerate(_scores(28).results)
    ]
    current = run(jittered)
    verdict = judge(
        score_run(current, ks=[5], depth=10),
        current.coverage,
        Policy(min_rank_overlap=None),
        score_run(base, ks=[5], depth=10),
        compare_runs(current, base, 10, 0.05),
    )
    assert verdict.changes["hit_rate@5"].delta < -0.02
    assert verdict.outcome == "ok"


def test_floor_fails_even_without_a_baseline() -> None:
    verdict = _judge(20, None, Policy(floors={"hit_rate@5": 0.8}))
    assert verdict.outcome == "regression"
    assert [f.kind for f in verdict.failures] == ["floor"]
    assert "hit_rate@5 0.5000 is below the floor 0.8000" in verdict.failures[0].message


def test_low_coverage_is_unavailable_never_regression() -> None:
    pairs = [(c, answer([], outcome="http_5xx")) for c in CASES[:30]] + [
        (c, answer(["nothing"])) for c in CASES[30:]
    ]
    current = run(pairs)
    verdict = judge(
        score_run(current, ks=[5], depth=10),
        current.coverage,
        Policy(floors={"hit_rate@5": 0.8}),
    )
    assert verdict.outcome == "unavailable"
    assert [f.kind for f in verdict.failures] == ["coverage"]


def test_rank_churn_below_min_rank_overlap_fails() -> None:
    ids = [f"x{i}" for i in range(10)]
    base = run([(case("free"), answer(ids))])
    current = run([(case("free"), answer(list(reversed(ids))))])
    drift = compare_runs(current, base, 10, 0.05)
    verdict = judge(
        score_run(current, ks=[5], depth=10),
        1.0,
        Policy(min_rank_overlap=0.7),
        score_run(base, ks=[5], depth=10),
        drift,
    )
    assert drift.rank_overlap is not None
    assert drift.rank_overlap < 0.7
    assert [f.kind for f in verdict.failures] == ["rank_overlap"]


def test_score_shift_is_drift_not_a_quality_regression() -> None:
    ids = [f"x{i}" for i in range(5)]
    base = run([(case("a", ["x0"]), answer(ids, [0.9, 0.8, 0.7, 0.6, 0.5]))])
    current = run([(case("a", ["x0"]), answer(ids, [0.75, 0.65, 0.55, 0.45, 0.35]))])
    drift = compare_runs(current, base, 10, 0.05)
    assert drift.score_drift is not None
    assert abs(drift.score_drift - 0.15) < 1e-9
    assert drift.score_drifted_ratio == 1.0
    assert drift.rank_overlap == 1.0
    verdict = judge(
        score_run(current, ks=[5], depth=10),
        1.0,
        Policy(),
        score_run(base, ks=[5], depth=10),
        drift,
    )
    assert verdict.outcome == "ok"
