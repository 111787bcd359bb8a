"""The on-call diff: worst cases first, ids that entered and left with ranks and scores, and
beside them each canary's score moves, query-vector cosine and why its lost ids left."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import pytest
from factories import case_entry, run_report
from rich.console import Console

from ragcanary.measure.run_report import ABSENT, RunReport, StaleLabelEntry
from ragcanary.measure.vector_text import encode_vector
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


def test_a_fall_of_judged_at_k_is_no_drop_and_ranks_no_case() -> None:
    """A case whose top-k only lost its labels sorts after a real drop, which it names."""

    def judged_case(case_id: str, ids: list[str], hit: float, judged: float) -> dict[str, Any]:
        return case_entry(
            case_id, ids=ids, scores=[0.9, 0.8], metrics={"hit_rate@5": hit, "judged@5": judged}
        )

    before = _report(
        "r1",
        [
            judged_case("unlabelled", ["a", "b"], 1.0, 1.0),
            judged_case("dropped", ["c", "d"], 1.0, 0.5),
        ],
        1.0,
    )
    after = _report(
        "r2",
        [
            judged_case("unlabelled", ["a", "n"], 1.0, 0.0),
            judged_case("dropped", ["e", "d"], 0.5, 0.5),
        ],
        0.75,
    )
    diff = diff_reports(before, after)
    assert [c["id"] for c in diff["cases"]] == ["dropped", "unlabelled"]
    assert diff["cases"][1]["metrics"]["judged@5"]["delta"] == -1.0  # shown all the same
    out = io.StringIO()
    Console(file=out, width=200).print(render_diff(diff))
    assert "judged@5" not in out.getvalue()  # no case's worst change
    assert "hit_rate@5 1.0000→0.5000" in out.getvalue()


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


# --- score and embedding drift, and why the lost ids left ----------------------------------


def _vs(baseline: str) -> dict[str, Any]:
    """A report's `baseline`: its comparison with run ``baseline``."""
    return {"run_id": baseline, "deltas": {}, "p_values": {}, "ci": {}, "win_tie_loss": {}}


def _lost(*pairs: tuple[str, str]) -> dict[str, Any]:
    """A case's `vs_baseline` whose judged ids ``pairs`` (id, why) were lost."""
    comparison = {"rbo": 0.5, "jaccard": 0.5, "entered": [], "left": [], "top_score_delta": None}
    return {**comparison, "lost": [{"id": doc, "why": why} for doc, why in pairs]}


def test_each_id_in_both_runs_whose_score_moved_shows_both_scores_and_the_delta() -> None:
    """Largest move first; moves over the suite's score_drift are flagged; unmoved ids are
    left out; the scores are the ones served, unrounded."""
    before = _report(
        "r1", [_case("c", ["a", "b", "d", "e"], [0.91234567, 0.8, 0.7, 0.6], 1.0)], 1.0
    )
    after = _report("r2", [_case("c", ["a", "d", "b", "f"], [0.95, 0.69, 0.7999, 0.5], 1.0)], 1.0)
    diff = diff_reports(before, after, score_drift=0.03)
    (case,) = diff["cases"]
    assert [(m["id"], m["from"], m["to"], m["drifted"]) for m in case["score_moves"]] == [
        ("a", 0.91234567, 0.95, True),  # +0.0377, over 0.03
        ("d", 0.7, 0.69, False),
        ("b", 0.8, 0.7999, False),
    ]
    assert case["score_moves"][0]["delta"] == 0.95 - 0.91234567
    assert diff["thresholds"] == {"score_drift": 0.03, "embedding_changed_below": 0.999}
    shown = _rendered(diff)
    assert "drift (! over score_drift 0.03; --json has the exact scores)" in shown
    assert "query vector cos" not in shown  # no vectors to compare
    assert "a 0.9123→0.9500 +0.0377!, d 0.7000→0.6900 -0.0100, b 0.8000→0.7999 -0.0001" in shown


def test_a_move_exactly_at_score_drift_is_not_flagged_and_without_a_threshold_none_is() -> None:
    before = _report("r1", [_case("c", ["a", "b"], [0.1, 0.9], 1.0)], 1.0)
    after = _report("r2", [_case("c", ["a", "b"], [0.05, 0.2], 1.0)], 1.0)
    moves = diff_reports(before, after, score_drift=0.05)["cases"][0]["score_moves"]
    assert [(m["id"], m["drifted"]) for m in moves] == [("b", True), ("a", False)]
    moves = diff_reports(before, after)["cases"][0]["score_moves"]
    assert [m["drifted"] for m in moves] == [False, False]
    assert "!" not in _rendered(diff_reports(before, after))


def test_a_tiny_score_move_is_never_printed_as_zero() -> None:
    before = _report("r1", [_case("c", ["a"], [0.5], 1.0)], 1.0)
    after = _report("r2", [_case("c", ["a"], [0.500002], 1.0)], 1.0)
    shown = _rendered(diff_reports(before, after, score_drift=0.03))
    assert "a 0.5000→0.5000 +2.0e-06" in shown


def _embedded(case_id: str, vector: list[float], query: str | None = None) -> dict[str, Any]:
    entry = _case(case_id, ["a", "b"], [0.9, 0.8], 1.0)
    if query is not None:
        entry["query"] = query
    return {**entry, "query_vector": encode_vector(vector)}


def test_the_query_vectors_cosine_is_shown_and_a_moved_vector_is_a_change() -> None:
    """Same lists, but one canary's query vector turned: that canary is listed as changed,
    with the cosine of its two vectors; the unmoved one is not listed."""
    before = _report(
        "r1", [_embedded("still", [1.0, 0.0, 0.0]), _embedded("turned", [1.0, 0.0, 0.0])], 1.0
    )
    after = _report(
        "r2", [_embedded("still", [1.0, 0.0, 0.0]), _embedded("turned", [0.6, 0.8, 0.0])], 1.0
    )
    diff = diff_reports(before, after, score_drift=0.03)
    (case,) = diff["cases"]
    assert case["id"] == "turned"
    assert abs(case["embedding_cosine"] - 0.6) < 1e-6
    assert case["embedding_moved"] is True
    assert diff["unchanged"] == 1
    shown = _rendered(diff)
    assert "turned" in shown
    assert "0.600000 moved" in shown


def test_vectors_of_another_length_have_no_cosine_and_count_as_moved() -> None:
    before = _report("r1", [_embedded("c", [1.0, 0.0])], 1.0)
    after = _report("r2", [_embedded("c", [1.0, 0.0, 0.0])], 1.0)
    (case,) = diff_reports(before, after)["cases"]
    assert (case["embedding_cosine"], case["embedding_moved"]) == (None, True)


def test_without_both_vectors_the_later_reports_own_cosine_is_used_only_against_its_baseline() -> (
    None
):
    """Storage drops the vectors of older runs: then the later report's embedding_cosine says
    it, when that report was compared with the earlier run; else nothing is said."""
    before = _report("r1", [_case("c", ["a", "b"], [0.9, 0.8], 1.0)], 1.0)
    entry = {**_case("c", ["a", "b"], [0.9, 0.7], 1.0), "embedding_cosine": 0.9995}
    after = _report("r2", [entry], 1.0, baseline=_vs("r1"))
    (case,) = diff_reports(before, after)["cases"]
    assert (case["embedding_cosine"], case["embedding_moved"]) == (0.9995, False)
    other = _report("r2", [entry], 1.0, baseline=_vs("r0"))
    (case,) = diff_reports(before, other)["cases"]
    assert "embedding_cosine" not in case
    assert "embedding_moved" not in case


def test_an_edited_query_is_not_compared_by_its_vectors() -> None:
    before = _report("r1", [_embedded("c", [1.0, 0.0], query="old words")], 1.0)
    after = _report("r2", [_embedded("c", [0.0, 1.0], query="new words")], 1.0)
    assert diff_reports(before, after)["cases"] == []  # the lists are the same


def test_an_id_that_left_carries_why_the_later_run_lost_it() -> None:
    """The later run's diagnosis per lost id rides on the id that left, in the JSON and in
    the terminal; an id it did not diagnose has no `why`."""
    before = _report("r1", [_case("c", ["x", "y", "z"], [0.9, 0.8, 0.7], 1.0)], 1.0)
    entry = {
        **_case("c", ["z", "n", "m"], [0.7, 0.6, 0.5], 0.0),
        "vs_baseline": _lost(("x", "not_in_index")),
    }
    after = _report("r2", [entry], 0.0, baseline=_vs("r1"))
    diff = diff_reports(before, after, relevant={"c": {"x"}})
    left = {e["id"]: e for e in diff["cases"][0]["left"]}
    assert left["x"]["why"] == "not_in_index"
    assert "why" not in left["y"]
    assert diff["to"]["baseline_run_id"] == "r1"
    assert diff["from"]["baseline_run_id"] is None
    shown = _rendered(diff)
    assert "★x (#1 0.900): not_in_index, y (#2 0.800) " in shown


@pytest.mark.parametrize("lost", [None, []])
def test_a_report_without_lost_ids_adds_no_why(lost: list[Any] | None) -> None:
    before = _report("r1", [_case("c", ["x", "y"], [0.9, 0.8], 1.0)], 1.0)
    comparison = _lost()
    if lost is None:
        del comparison["lost"]  # a report older than the diagnosis
    entry = {**_case("c", ["y"], [0.8], 0.0), "vs_baseline": comparison}
    after = _report("r2", [entry], 0.0, baseline=_vs("r1"))
    (case,) = diff_reports(before, after)["cases"]
    assert case["left"] == [{"id": "x", "rank": 1, "score": 0.9}]


# --- fingerprints: what the two runs were made with -----------------------------------------


def _fingerprint(model: str, documents: int | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "config_hash": "3f9a1c0e7b21",
        "suite_hash": "a04c5e11d9b0",
        "target_hash": "6de2f0a9c113",
        "embedding_model": model,
        "embedding_dimensions": 384,
    }
    if documents is not None:
        found["documents"] = documents
    return found


def test_what_the_runs_were_made_with_is_printed_before_anything_else() -> None:
    cases = [_case("lost", ["x", "y"], [0.9, 0.8], 1.0)]
    worse = [_case("lost", ["y", "z"], [0.7, 0.6], 0.0)]
    diagnosis = {"cause": "index_lost", "summary": "1 judged document left the index: x"}
    before = _report("r1", cases, 1.0, fingerprint=_fingerprint("all-MiniLM-L6-v2", 3086))
    after = _report(
        "r2", worse, 0.0, fingerprint=_fingerprint("bge-small", 2970), diagnosis=diagnosis
    )
    diff = diff_reports(before, after)
    assert diff["fingerprint_changes"] == [
        {
            "field": "embedding_model",
            "from": "all-MiniLM-L6-v2",
            "to": "bge-small",
            "text": "embedding model all-MiniLM-L6-v2 → bge-small",
        },
        {"field": "documents", "from": 3086, "to": 2970, "text": "documents 3,086 → 2,970 (-116)"},
    ]
    assert diff["from"]["fingerprint"]["documents"] == 3086
    lines = [line.strip() for line in _rendered(diff).splitlines() if line.strip()]
    assert lines[1:4] == [
        "changed: embedding model all-MiniLM-L6-v2 → bge-small",
        "changed: documents 3,086 → 2,970 (-116)",
        "cause index_lost: 1 judged document left the index: x",
    ]


def test_runs_stored_before_fingerprints_print_no_change() -> None:
    cases = [_case("same", ["a"], [0.9], 1.0)]
    before = _report("r1", cases, 1.0)
    after = _report("r2", cases, 1.0, fingerprint=_fingerprint("bge-small", None))
    diff = diff_reports(before, after)
    assert diff["fingerprint_changes"] == []
    assert diff["from"]["fingerprint"] is None
    assert "changed:" not in _rendered(diff)
