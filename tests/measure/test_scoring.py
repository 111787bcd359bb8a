"""Scoring a run: which cases count, weighting, tags and per-canary score checks."""

from __future__ import annotations

import pytest
from factories import answer, case, run

from ragcanary.measure.scoring import score_run


def test_failed_queries_never_count_as_misses() -> None:
    """An unanswered case is left out of the aggregates instead of scoring 0."""
    scored = score_run(
        run([(case("a", ["x"]), answer(["x"])), (case("b", ["y"]), answer([], outcome="timeout"))]),
        ks=[5],
        depth=10,
    )
    assert scored.metrics["hit_rate@5"] == 1.0
    assert set(scored.per_case) == {"a"}


def test_empty_answer_is_a_miss_not_a_failure() -> None:
    scored = score_run(run([(case("a", ["x"]), answer([]))]), ks=[5], depth=10)
    assert scored.metrics["hit_rate@5"] == 0.0


def test_aggregates_are_weighted_means_and_per_tag() -> None:
    cases = [
        (case("a", ["x"], weight=3.0, tags=("json",)), answer(["x"])),
        (case("b", ["y"], weight=1.0, tags=("json", "files")), answer(["z"])),
    ]
    scored = score_run(run(cases), ks=[1], depth=10)
    assert scored.metrics["hit_rate@1"] == pytest.approx(0.75)
    assert scored.by_tag["json"]["hit_rate@1"] == pytest.approx(0.75)
    assert scored.by_tag["files"]["hit_rate@1"] == 0.0
    assert scored.metrics["mrr"] == pytest.approx(0.75)


def test_negative_and_label_free_cases_do_not_feed_quality() -> None:
    cases = [
        (case("a", ["x"]), answer(["x"])),
        (case("neg", [], max_score=0.5), answer(["x"], [0.2])),
        (case("free"), answer(["q"])),
    ]
    scored = score_run(run(cases), ks=[1], depth=10)
    assert set(scored.per_case) == {"a"}
    assert scored.checks == ()


def test_negative_canary_leaks_when_a_score_reaches_max_score() -> None:
    scored = score_run(
        run([(case("neg", [], max_score=0.5), answer(["p", "q"], [0.5, 0.1]))]), ks=[1], depth=10
    )
    (check,) = scored.checks
    assert (check.kind, check.case, check.doc_id, check.score) == ("negative_leak", "neg", "p", 0.5)


@pytest.mark.parametrize(
    ("ids", "scores", "violated"),
    [
        (["x"], [0.7], False),
        (["x"], [0.3], True),
        ([], [], True),
    ],
)
def test_min_score_checks_the_top_hit(ids: list[str], scores: list[float], violated: bool) -> None:
    scored = score_run(
        run([(case("a", ["x"], min_score=0.5), answer(ids, scores))]), ks=[1], depth=10
    )
    assert bool(scored.checks) == violated


@pytest.mark.parametrize(
    ("scores", "leaks"),
    [
        pytest.param([0.9, 0.3], True, id="a-close-distance"),
        pytest.param([0.35, 0.5], False, id="only-far-distances"),
        pytest.param([0.3], True, id="at-the-bound"),
    ],
)
def test_a_distance_leaks_when_it_is_at_or_below_max_score(
    scores: list[float], leaks: bool
) -> None:
    """For a distance (score_order asc) lower is closer: the bound is crossed from above."""
    ids = [f"d{i}" for i in range(len(scores))]
    scored = score_run(
        run([(case("neg", [], max_score=0.3), answer(ids, scores))]),
        ks=[1],
        depth=10,
        score_order="asc",
    )
    assert bool(scored.checks) == leaks
    if leaks:
        (check,) = scored.checks
        assert check.kind == "negative_leak"
        assert check.score == min(scores)
        assert "at or below max_score" in check.message


@pytest.mark.parametrize(
    ("top", "violated"),
    [(0.2, False), (0.4, False), (0.45, True)],
)
def test_min_score_of_a_distance_bounds_the_top_hit_from_above(top: float, violated: bool) -> None:
    """For a distance, the best hit must be at most min_score away."""
    scored = score_run(
        run([(case("a", ["x"], min_score=0.4), answer(["x", "y"], [top, 0.9]))]),
        ks=[1],
        depth=10,
        score_order="asc",
    )
    assert bool(scored.checks) == violated
    if violated:
        assert "above min_score" in scored.checks[0].message
