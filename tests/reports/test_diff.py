"""The on-call diff: worst cases first, ids that entered and left with ranks and scores."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

from factories import case_entry, run_report
from rich.console import Console

from ragcanary.measure.run_report import ABSENT, RunReport, StaleLabelEntry
from ragcanary.reports.diff import diff_reports
from ragcanary.reports.table import render_diff


def _report(run_id: str, cases: list[dict[str, Any]], hit: float, **more: Any) -> RunReport:
    return run_report(
        run_id,
        started_at="2026-11-22T03:00:00+00:00",
        metrics={"hit_rate@5": hit},
        cases=cases,
        **more,
    )


def _case(case_id: str, ids: list[str], scores: list[float], hit: float) -> dict[str, Any]:
    return case_entry(
        case_id,
        query=f"q {case_id}",
        ids=ids,
        scores=scores,
        metrics={"hit_rate@5": hit, "rr": hit},
    )


def test_case_that_lost_its_document_comes_first_with_the_id_that_left() -> None:
    before = _report(
        "r1",
        [
            _case("same", ["a", "b"], [0.9, 0.8], 1.0),
            _case("churned", ["c", "d"], [0.9, 0.8], 1.0),
            _case("lost", ["x", "y"], [0.9, 0.8], 1.0),
        ],
        1.0,
    )
    after = _report(
        "r2",
        [
            _case("same", ["a", "b"], [0.9, 0.8], 1.0),
            _case("churned", ["d", "c"], [0.85, 0.8], 1.0),
            _case("lost", ["y", "z"], [0.7, 0.6], 0.0),
        ],
        2 / 3,
    )
    diff = diff_reports(before, after)
    assert [c["id"] for c in diff["cases"]] == ["lost", "churned"]
    assert diff["unchanged"] == 1
    lost = diff["cases"][0]
    assert lost["left"] == [{"id": "x", "rank": 1, "score": 0.9}]
    assert lost["entered"] == [{"id": "z", "rank": 2, "score": 0.6}]
    assert lost["metrics"]["hit_rate@5"] == {"from": 1.0, "to": 0.0, "delta": -1.0}
    assert abs(lost["score_deltas"]["y"] - (0.7 - 0.8)) < 1e-12
    assert abs(diff["metrics"]["hit_rate@5"]["delta"] + 1 / 3) < 1e-12
    churned = diff["cases"][1]
    assert {m["id"] for m in churned["moves"]} == {"c", "d"}


def test_cases_added_or_removed_between_runs_are_named() -> None:
    before = _report("r1", [_case("old", ["a"], [0.9], 1.0)], 1.0)
    after = _report("r2", [_case("new", ["a"], [0.9], 1.0)], 1.0)
    diff = diff_reports(before, after)
    assert (diff["added"], diff["removed"], diff["cases"]) == (["new"], ["old"], [])


def test_an_id_that_left_is_marked_as_gone_from_the_index_or_not_returned() -> None:
    before = _report(
        "r1",
        [
            _case("deleted", ["gone", "b"], [0.9, 0.8], 1.0),
            _case("unseen", ["faded", "c"], [0.9, 0.8], 1.0),
            _case("moved", ["kept", "d"], [0.9, 0.8], 1.0),
        ],
        1.0,
    )
    after = _report(
        "r2",
        [
            _case("deleted", ["b", "e"], [0.8, 0.7], 0.0),
            _case("unseen", ["c", "f"], [0.8, 0.7], 0.0),
            _case("moved", ["d", "g"], [0.8, 0.7], 0.0),
        ],
        0.0,
        stale_labels=[
            {"case": "unseen", "id": "faded", "reason": "not_returned"},
            {"case": "deleted", "id": "gone", "reason": "missing"},
            {"case": "other", "id": "faded"},  # a report of before the reasons: not returned
        ],
    )
    diff = diff_reports(before, after)
    left = {c["id"]: c["left"][0] for c in diff["cases"]}
    assert (left["deleted"]["stale"], left["unseen"]["stale"], left["moved"]["stale"]) == (
        "missing",
        "not_returned",
        None,
    )
    shown = _rendered(diff)
    assert "gone† (#1 0.900)" in shown
    assert "faded‡ (#1 0.900)" in shown
    assert "kept (#1 0.900)" in shown
    title = " ".join(shown.split())  # the legend wraps at the table's width
    assert "★ relevant; † left the index; ‡ no canary gets it back)" in title


def test_without_stale_labels_the_diff_marks_nothing() -> None:
    before = _report("r1", [_case("c", ["a", "b"], [0.9, 0.8], 1.0)], 1.0)
    after = _report("r2", [_case("c", ["b", "e"], [0.8, 0.7], 0.0)], 0.0)
    diff = diff_reports(before, after)
    assert "stale" not in diff["cases"][0]["left"][0]  # the run could not tell
    assert "†" not in _rendered(diff)
    assert after.stale_labels is ABSENT
    assert (
        "stale"
        not in diff_reports(before, replace(after, stale_labels=None))["cases"][0]["left"][0]
    )  # null: the run looked and could not tell
    after = replace(after, stale_labels=(StaleLabelEntry("c", "a", "missing"),))
    assert diff_reports(before, after)["cases"][0]["left"][0]["stale"] == "missing"


def _rendered(diff: dict[str, Any]) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(render_diff(diff))
    return console.export_text()
