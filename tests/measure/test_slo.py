"""Quality SLOs: what a good answer is, which canaries are events, and the budget they leave."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from factories import case_entry, run_report

from ragcanary.measure.slo import (
    Events,
    GoodAnswer,
    Objective,
    RunEvents,
    budget,
    parse_good,
    run_events,
)

NOW = datetime(2026, 11, 1, tzinfo=UTC)
HIT5 = GoodAnswer("hit_rate@5")
DAY = 86400.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hit_rate@5", GoodAnswer("hit_rate@5")),
        ("  ndcg@10 >= 0.5 ", GoodAnswer("ndcg@10", 0.5)),
        ("ndcg@10>=1", GoodAnswer("ndcg@10", 1.0)),
        ("recall@3 ≥ 0.25", GoodAnswer("recall@3", 0.25)),
        ("mrr >= 0.5", GoodAnswer("mrr", 0.5)),
        ("map@10", GoodAnswer("map@10")),
    ],
)
def test_a_good_answer_is_a_metric_at_one_or_at_least_a_floor(
    text: str, expected: GoodAnswer
) -> None:
    assert parse_good(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("foo@5", "'foo@5' is not a metric"),
        ("hit_rate", "'hit_rate' is not a metric"),
        ("hit_rate@0", "is not a metric"),
        ("mrr@5", "is not a metric"),
        ("ndcg@10 > 0.5", "use >="),
        ("ndcg@10 >= lots", "'lots' is not a number"),
        ("ndcg@10 >= 1.5", "not a floor above 0 and at most 1"),
        ("ndcg@10 >= 0", "not a floor above 0"),
        ("ndcg@10 >= nan", "not a floor"),
        ("hit_rate@5 and more", "is not a metric or a metric >= value"),
        ("", "is not a metric"),
    ],
)
def test_a_malformed_good_answer_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_good(text)


def test_report_names_map_to_the_per_case_metrics() -> None:
    assert GoodAnswer("mrr").case_metric == "rr"
    assert GoodAnswer("map@10").case_metric == "ap@10"
    assert GoodAnswer("ndcg@10", 0.5).case_metric == "ndcg@10"
    assert (GoodAnswer("ndcg@10", 0.5).k, GoodAnswer("mrr").k) == (10, None)
    assert str(GoodAnswer("ndcg@10", 0.5)) == "ndcg@10 >= 0.5"


def _hit(case_id: str, value: float, **more: object) -> dict[str, object]:
    return case_entry(case_id, metrics={"hit_rate@5": value, "ndcg@10": value / 2}, **more)


def test_answered_labelled_canaries_are_events_and_those_at_one_are_good() -> None:
    report = run_report(cases=[_hit("a", 1.0), _hit("b", 0.0), _hit("c", 1.0)])
    assert run_events(report, HIT5) == Events(events=3, good=2)


def test_a_floor_counts_answers_at_or_over_it() -> None:
    report = run_report(cases=[_hit("a", 1.0), _hit("b", 0.0), _hit("c", 0.99)])
    # ndcg@10 is half of the hit value here: 0.5, 0, 0.495
    assert run_events(report, GoodAnswer("ndcg@10", 0.5)) == Events(events=3, good=1)


def test_negative_label_free_and_unanswered_canaries_are_no_events() -> None:
    report = run_report(
        cases=[
            _hit("a", 1.0),
            case_entry("neg", kind="negative"),
            case_entry("free", kind="label_free"),
            case_entry("down", outcome="timeout", error="timed out"),
            case_entry("bad", outcome="http_5xx", metrics={"hit_rate@5": 0.0}),
        ]
    )
    assert run_events(report, HIT5) == Events(events=1, good=1)


def test_an_unavailable_run_is_an_outage_not_bad_events() -> None:
    report = run_report(outcome="unavailable", coverage=0.5, cases=[_hit("a", 0.0)])
    assert run_events(report, HIT5) == Events(0, 0)


def test_a_regression_run_counts_like_any_answered_run() -> None:
    report = run_report(outcome="regression", cases=[_hit("a", 0.0), _hit("b", 1.0)])
    assert run_events(report, HIT5) == Events(2, 1)


def test_a_metric_the_run_did_not_compute_is_no_event() -> None:
    report = run_report(cases=[case_entry("a", metrics={"hit_rate@1": 1.0})])
    assert run_events(report, HIT5) == Events(0, 0)


def _runs(*points: tuple[float, int, int]) -> list[RunEvents]:
    """(hours before NOW, events, good) of each run."""
    return [RunEvents(NOW - timedelta(hours=h), e, g) for h, e, g in points]


def test_the_budget_is_untouched_when_every_event_is_good() -> None:
    found = budget(_runs((0.5, 10, 10), (30, 10, 10)), Objective(0.99, 30 * DAY, HIT5), NOW)
    assert (found.events, found.good, found.sli, found.remaining) == (20, 20, 1.0, 1.0)
    assert found.burn_rates == {"1h": 0.0, "6h": 0.0}


def test_remaining_budget_and_burn_rates_follow_the_bad_share() -> None:
    objective = Objective(0.9, 30 * DAY, HIT5)  # a budget of 10 % bad events
    found = budget(_runs((0.5, 10, 8), (3, 10, 10), (100, 80, 80)), objective, NOW)
    assert found.sli == pytest.approx(98 / 100)
    assert found.remaining == pytest.approx(1 - 0.02 / 0.1)  # a fifth of it spent
    assert found.burn_rates["1h"] == pytest.approx(0.2 / 0.1)  # 2x: spent in half the window
    assert found.burn_rates["6h"] == pytest.approx(0.1 / 0.1)


def test_an_overspent_budget_goes_below_zero() -> None:
    found = budget(_runs((1, 10, 5)), Objective(0.9, 30 * DAY, HIT5), NOW)
    assert found.remaining == pytest.approx(1 - 0.5 / 0.1)


def test_runs_outside_the_window_or_in_the_future_do_not_count() -> None:
    objective = Objective(0.99, 7 * DAY, HIT5)
    found = budget(_runs((7 * 24 + 1, 10, 0), (-1, 10, 0), (2, 4, 4)), objective, NOW)
    assert (found.events, found.good, found.remaining) == (4, 4, 1.0)
    assert found.burn_rates == {"1h": None, "6h": 0.0}


def test_a_window_without_events_has_no_sli_nor_budget_figure() -> None:
    found = budget([], Objective(0.99, 30 * DAY, HIT5), NOW)
    assert (found.sli, found.remaining, found.events) == (None, None, 0)
    assert found.burn_rates == {"1h": None, "6h": None}
