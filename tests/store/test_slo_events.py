"""The SLO events of stored runs, read from the rankings they share, and the ledger's budgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import case_entry, run_report

from ragcanary.measure.run_report import RunReport
from ragcanary.measure.slo import GoodAnswer, Objective
from ragcanary.store.slo_events import SloLedger, stored_events
from ragcanary.store.storage import Store

HIT5 = GoodAnswer("hit_rate@5")
START = datetime(2026, 11, 1, tzinfo=UTC)
PAIR = ("core", "search")


def _run(
    run_id: str, minutes: int, *hits: float, outcome: str = "ok", target: str = "search"
) -> RunReport:
    cases = [
        case_entry(f"c{i}", ids=[f"d{i}"], metrics={"hit_rate@5": h}) for i, h in enumerate(hits)
    ]
    cases.append(case_entry("neg", kind="negative", ids=["x"]))
    cases.append(case_entry("gone", outcome="timeout", error="timed out"))
    return run_report(
        run_id,
        target=target,
        started_at=(START + timedelta(minutes=minutes)).isoformat(),
        duration_s=30.0,
        outcome=outcome,
        cases=cases,
    )


def test_each_answered_run_s_events_come_back_by_its_number(store: Store) -> None:
    for report in (
        _run("r1", 0, 1.0, 1.0, 0.0),
        _run("r2", 10, 1.0, 1.0, 0.0),  # the same rankings, stored once
        _run("r3", 20, 0.0, 0.0, 0.0, outcome="unavailable"),
        _run("r4", 30, 1.0, 0.0, 0.0, outcome="regression"),
        _run("other", 40, 0.0, 0.0, 0.0, target="elsewhere"),
    ):
        store.save_run(report)
    found = stored_events(store, "core", "search", HIT5, START - timedelta(hours=1))
    assert sorted((r.finished_at, r.events, r.good) for r in found.values()) == [
        (START + timedelta(minutes=0, seconds=30), 3, 2),
        (START + timedelta(minutes=10, seconds=30), 3, 2),
        (START + timedelta(minutes=30, seconds=30), 3, 1),
    ]
    later = stored_events(store, "core", "search", HIT5, START + timedelta(minutes=5))
    assert sorted(r.good for r in later.values()) == [1, 2]


def test_the_ledger_reads_new_runs_and_forgets_those_that_left_the_window(store: Store) -> None:
    objective = Objective(0.9, 3 * 86400.0, HIT5)
    ledger = SloLedger()
    store.save_run(_run("r1", 0, 1.0, 0.0))
    now = START + timedelta(hours=1)
    first = ledger.budgets(store, {PAIR: objective}, now)[PAIR]
    assert (first.events, first.good) == (2, 1)
    store.save_run(_run("r2", 70, 1.0, 1.0))
    second = ledger.budgets(store, {PAIR: objective}, now + timedelta(hours=1))[PAIR]
    assert (second.events, second.good) == (4, 3)
    assert second.remaining == pytest.approx(1 - (1 - 3 / 4) / 0.1)
    assert second.burn_rates["1h"] == 0.0
    gone = ledger.budgets(store, {PAIR: objective}, START + timedelta(days=3, minutes=1))[PAIR]
    assert (gone.events, gone.good) == (2, 2), "the first run left the 3-day window"
    assert ledger.budgets(store, {}, now) == {}


def test_a_changed_good_answer_is_counted_afresh(store: Store) -> None:
    store.save_run(_run("r1", 0, 1.0, 0.0))
    ledger = SloLedger()
    now = START + timedelta(hours=1)
    ledger.budgets(store, {PAIR: Objective(0.9, 30 * 86400.0, HIT5)}, now)
    other = Objective(0.9, 30 * 86400.0, GoodAnswer("hit_rate@5", 0.5))
    assert ledger.budgets(store, {PAIR: other}, now)[PAIR].good == 1
    nothing = Objective(0.9, 30 * 86400.0, GoodAnswer("ndcg@10"))
    assert ledger.budgets(store, {PAIR: nothing}, now)[PAIR].events == 0  # never computed
