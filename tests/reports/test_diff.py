"""The on-call diff: worst cases first, ids that entered and left with ranks and scores."""

from __future__ import annotations

from typing import Any

from ragcanary.reports.diff import diff_reports


def _report(run_id: str, cases: list[dict[str, Any]], hit: float) -> dict[str, Any]:
    return {
        "suite": "core",
        "target": "search",
        "run_id": run_id,
        "started_at": "2026-11-22T03:00:00+00:00",
        "outcome": "ok",
        "metrics": {"hit_rate@5": hit},
        "cases": cases,
    }


def _case(case_id: str, ids: list[str], scores: list[float], hit: float) -> dict[str, Any]:
    return {
        "id": case_id,
        "query": f"q {case_id}",
        "outcome": "ok",
        "ids": ids,
        "scores": scores,
        "metrics": {"hit_rate@5": hit, "rr": hit},
    }


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
