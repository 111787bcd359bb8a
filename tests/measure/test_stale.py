"""Which relevant ids left their canary's top-k against the baseline: those the index is asked
about again in that very run."""

from __future__ import annotations

from factories import answer, case, run

from ragcanary.measure.stale import left_top_k

A = case("a", {"d1": 2, "d2": 1, "d0": 0})
B = case("b", ["d3"])
NEGATIVE = case("n", [])


def test_relevant_ids_the_baseline_returned_and_the_run_did_not_have_left() -> None:
    baseline = run([(A, answer(["d1", "d2", "d0"])), (B, answer(["d3", "x"]))], "base")
    now = run([(A, answer(["x", "d2"])), (B, answer(["x", "d3"]))])
    assert left_top_k(now, baseline) == ["d1"]  # d3 moved, d0 is judged not relevant


def test_an_id_that_left_its_own_canary_left_even_if_another_canary_returns_it() -> None:
    baseline = run([(A, answer(["d1"])), (B, answer(["d3"]))], "base")
    now = run([(A, answer(["x"])), (B, answer(["d1", "d3"]))])
    assert left_top_k(now, baseline) == ["d1"]


def test_nothing_left_without_a_baseline_or_where_either_run_went_unanswered() -> None:
    baseline = run([(A, answer(["d1", "d2"])), (B, answer([], outcome="timeout"))], "base")
    now = run([(A, answer([], outcome="http_5xx")), (B, answer(["x"])), (NEGATIVE, answer([]))])
    assert left_top_k(now, None) == []
    assert left_top_k(now, baseline) == []


def test_an_empty_answer_is_an_answer_and_every_relevant_id_it_lacks_left() -> None:
    baseline = run([(A, answer(["d2", "d1"]))], "base")
    assert left_top_k(run([(A, answer([]))]), baseline) == ["d1", "d2"]
