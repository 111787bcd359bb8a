"""Calibration: the noise of an unchanged system and thresholds its own runs would pass."""

from __future__ import annotations

import random

import pytest
from factories import answer, case, run
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.model import SuiteConfig, Thresholds
from ragcanary.measure.calibrate import measure_noise
from ragcanary.measure.drift import compare_runs
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import RunResult
from ragcanary.measure.scoring import score_run
from ragcanary.suites.judge import settings_for

SUITE = SuiteConfig(cases="core.yaml", targets=["search"], k=[1, 3], depth=5)
CASES = [case(f"c{i}", [f"rel-{i}"]) for i in range(4)] + [case("free")]
FLOORS = {"max_drop": 0.01, "score_drift": 0.01, "min_rank_overlap": 0.9}


def _steady(n: int) -> list[RunResult]:
    """``n`` runs of a system that answers exactly the same every time."""
    pairs = [(c, answer([f"rel-{i}", "x", "y"], [0.9, 0.7, 0.5])) for i, c in enumerate(CASES)]
    return [run(pairs, run_id=f"run-{r}") for r in range(n)]


def _noisy(n: int, seed: int, jitter: float = 0.03, swap: float = 0.3) -> list[RunResult]:
    """``n`` runs whose scores jitter and whose top two sometimes swap, as a live index does."""
    rng = random.Random(seed)
    runs = []
    for r in range(n):
        pairs = []
        for i, c in enumerate(CASES):
            ids = [f"rel-{i}", f"d{i}-1", f"d{i}-2", f"d{i}-3"]
            if rng.random() < swap:
                ids[0], ids[1] = ids[1], ids[0]
            scores = [0.9 - 0.1 * rank + rng.uniform(-jitter, jitter) for rank in range(4)]
            pairs.append((c, answer(ids, scores)))
        runs.append(run(pairs, run_id=f"run-{r}"))
    return runs


def _with(suggested: dict[str, float]) -> SuiteConfig:
    thresholds = Thresholds(**suggested)
    return SuiteConfig(
        cases="core.yaml", targets=["search"], k=[1, 3], depth=5, thresholds=thresholds
    )


def _assert_runs_pass(
    runs: list[RunResult], suggested: dict[str, float], judge: bool = True
) -> None:
    """Every run against the first stays within the suggested thresholds (and passes, if judged)."""
    first = score_run(runs[0], SUITE.k, SUITE.depth, SUITE.gain).metrics
    for later in runs[1:]:
        metrics = score_run(later, SUITE.k, SUITE.depth, SUITE.gain).metrics
        assert all(first[m] - metrics[m] <= suggested["max_drop"] + 1e-9 for m in metrics)
        drift = compare_runs(later, runs[0], SUITE.depth, suggested["score_drift"])
        assert drift.score_drifted_ratio == 0
        assert drift.rank_overlap is not None
        assert drift.rank_overlap >= suggested["min_rank_overlap"]
        if judge:
            assert evaluate(later, settings_for(_with(suggested)), runs[0]).verdict.outcome == "ok"


@pytest.mark.parametrize("n", [2, 3, 10])
def test_identical_runs_have_no_spread_and_floor_suggestions(n: int) -> None:
    noise = measure_noise(_steady(n), settings_for(SUITE))
    assert noise.runs == n
    assert noise.metrics
    assert all(s.std == 0 and s.low == s.high == s.mean for s in noise.metrics.values())
    assert noise.metrics["hit_rate@1"].mean == 1.0
    assert noise.rank_overlap is not None
    assert (noise.rank_overlap.low, noise.rank_overlap.std) == (1.0, 0.0)
    assert noise.score_delta is not None
    assert noise.score_delta.high == 0.0
    assert noise.top_score_delta is not None
    assert noise.top_score_delta.high == 0.0
    assert noise.coverage.low == 1.0
    assert noise.suggested == FLOORS


def test_a_single_run_has_no_comparison_and_floor_suggestions() -> None:
    noise = measure_noise(_steady(1), settings_for(SUITE))
    assert (noise.rank_overlap, noise.score_delta, noise.top_score_delta) == (None, None, None)
    assert noise.suggested == FLOORS


def test_no_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        measure_noise([], settings_for(SUITE))


def test_noisy_runs_give_larger_suggestions_that_the_runs_themselves_pass() -> None:
    runs = _noisy(5, seed=7)
    noise = measure_noise(runs, settings_for(SUITE))
    assert noise.suggested["max_drop"] > FLOORS["max_drop"]
    assert noise.suggested["score_drift"] > FLOORS["score_drift"]
    assert noise.suggested["min_rank_overlap"] < FLOORS["min_rank_overlap"]
    assert noise.rank_overlap is not None
    assert noise.rank_overlap.low < 1.0
    assert noise.score_delta is not None
    assert noise.score_delta.high > 0  # swapped ids carry their new rank's score
    _assert_runs_pass(runs, noise.suggested)


def test_score_jitter_alone_moves_score_drift_but_not_rank_or_metrics() -> None:
    noise = measure_noise(_noisy(4, seed=1, jitter=0.02, swap=0.0), settings_for(SUITE))
    assert noise.suggested["max_drop"] == FLOORS["max_drop"]
    assert noise.suggested["min_rank_overlap"] == FLOORS["min_rank_overlap"]
    assert 0.01 < noise.suggested["score_drift"] <= 0.06


def test_max_drop_covers_one_outlying_run_among_many() -> None:
    """Nine identical runs and one where a canary's document fell to rank 2.

    hit_rate@1 spans 1.0 to 0.75; three standard deviations (0.225) would not cover that.
    """
    runs = _steady(9)
    pairs = [(c, answer([f"rel-{i}", "x", "y"], [0.9, 0.7, 0.5])) for i, c in enumerate(CASES)]
    pairs[0] = (CASES[0], answer(["x", "rel-0", "y"], [0.9, 0.7, 0.5]))
    outlier = run(pairs, run_id="outlier")
    noise = measure_noise([*runs, outlier], settings_for(SUITE))
    assert noise.metrics["hit_rate@1"].high - noise.metrics["hit_rate@1"].low == 0.25
    assert noise.suggested["max_drop"] >= 0.25
    _assert_runs_pass([*runs, outlier], noise.suggested)


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=8),
    seed=st.integers(min_value=0, max_value=10_000),
    jitter=st.floats(min_value=0.0, max_value=0.1),
    swap=st.floats(min_value=0.0, max_value=0.6),
)
def test_suggestions_never_fail_the_runs_they_came_from(
    n: int, seed: int, jitter: float, swap: float
) -> None:
    runs = _noisy(n, seed, jitter, swap)
    noise = measure_noise(runs, settings_for(SUITE))
    assert all(noise.suggested[k] >= v for k, v in FLOORS.items() if k != "min_rank_overlap")
    assert noise.suggested["min_rank_overlap"] <= FLOORS["min_rank_overlap"]
    _assert_runs_pass(runs, noise.suggested, judge=False)  # judging is slow; bounds suffice


def test_judged_share_moving_does_not_raise_the_suggested_max_drop() -> None:
    """Judged@k never fails a run by dropping, so its spread leaves max_drop alone."""
    labelled = [case(f"c{i}", {f"rel-{i}": 1, f"no-{i}": 0}) for i in range(4)]
    runs = [
        run(
            [(c, answer([f"rel-{i}", f"{other}-{i}"], [0.9, 0.5])) for i, c in enumerate(labelled)],
            run_id=f"run-{other}",
        )
        for other in ("no", "new", "no")
    ]
    noise = measure_noise(runs, settings_for(SUITE))
    assert noise.metrics["judged@3"].high - noise.metrics["judged@3"].low == 0.5
    assert noise.suggested["max_drop"] == 0.01
