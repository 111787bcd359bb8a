"""The report's JSON (measure/report_json.py): keys in the documented order, read back equal,
a key left out kept apart from null, and a hand-written report read, not refused."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from factories import answer, case, case_entry, report_data, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.diagnosis import Diagnosis
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.lost_ids import AnnRecall
from ragcanary.measure.report_json import REQUIRED, marshal, missing_keys, unmarshal
from ragcanary.measure.results import OUTCOMES, RunResult
from ragcanary.measure.run_report import (
    ABSENT,
    CaseEntry,
    Counts,
    IndexLookup,
    RunClaim,
    RunReport,
    StaleLabelEntry,
    build_report,
)
from ragcanary.measure.vector_text import encode_vector
from ragcanary.suites.judge import settings_for

# docs/report.md: the keys of a report, of its baseline and of a case, in the order written.
RUN_KEYS = [
    "suite",
    "target",
    "run_id",
    "started_at",
    "duration_s",
    "outcome",
    "diagnosis",
    "coverage",
    "metrics",
    "metrics_by_tag",
    "baseline",
    "failures",
    "regressions",
    "counts",
]
DAEMON_KEYS = ["claim", "stale_labels", "index_lookup"]  # before the cases
BASELINE_KEYS = [
    "run_id",
    "deltas",
    "p_values",
    "ci",
    "win_tie_loss",
    "rank_overlap",
    "score_drift",
    "score_drifted_ratio",
    "score_shift",
    "top_score_delta",
    "embedding_drift",
    "embedding_changed_ratio",
    "embedding_dimensions",
]
CASE_KEYS = ["id", "query", "kind", "outcome", "ids", "scores", "latency_s", "error", "metrics"]
COUNTS_KEYS = ["cases", "answered", "labelled", "negative", "label_free", "outcomes", "short"]

CASES = [
    case("kept", ["d1"], tags=("faq",)),
    case("turned", ["d2"], tags=("faq",)),
    case("lost", ["d3"]),
    case("neg", [], max_score=0.5),
    case("free"),
    case("down", ["d4"]),
]
SETTINGS = settings_for(
    SuiteConfig(cases="suite.yaml", targets=["search"], k=[1, 3], min_coverage=0.5)
)


def _embedded(
    pairs: list[tuple[Any, Any]], vectors: list[tuple[float, ...] | None], run_id: str
) -> RunResult:
    done = run(pairs, run_id)
    results = tuple(replace(r, vector=v) for r, v in zip(done.results, vectors, strict=True))
    return replace(done, results=results)


def _turned(angle: float) -> tuple[float, float]:
    return (math.cos(angle), math.sin(angle))


BASELINE_RUN = _embedded(
    [
        (CASES[0], answer(["d1", "x"])),
        (CASES[1], answer(["d2", "y"])),
        (CASES[2], answer(["d3", "z"], [0.8, 0.7])),
        (CASES[3], answer(["n"], [0.2])),
        (CASES[4], answer(["f", "g"])),
        (CASES[5], answer(["d4"])),
    ],
    [_turned(0.0), _turned(0.0), _turned(0.0), _turned(0.0), _turned(0.0), _turned(0.0)],
    "base",
)
CURRENT_RUN = _embedded(
    [
        (CASES[0], answer(["d1", "x"])),
        (CASES[1], answer(["d2", "y"])),
        (CASES[2], answer(["z", "w"], [0.6, math.nan])),  # lost its document; a NaN score
        (CASES[3], answer(["n"], [0.9])),  # leaks above its max_score
        (CASES[4], answer(["g", "f"])),
        (CASES[5], answer([], outcome="timeout")),
    ],
    # kept: unchanged; turned: cosine 0.5; lost: a zero vector (no cosine: null);
    # neg: not embedded this time (no cosine: key left out).
    [_turned(0.0), _turned(math.pi / 3), (0.0, 0.0), None, _turned(0.0), None],
    "current",
)


def _report(with_baseline: bool) -> RunReport:
    return build_report(evaluate(CURRENT_RUN, SETTINGS, BASELINE_RUN if with_baseline else None))


def ordered(value: Any) -> str:
    """``value`` as JSON text: equal only when the keys come in the same order too."""
    return json.dumps(value)


def _as_stored(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` through JSON text, as a file or the store holds it; refuses NaN."""
    loaded: dict[str, Any] = json.loads(json.dumps(data, allow_nan=False))
    return loaded


@pytest.mark.parametrize("with_baseline", [False, True], ids=["alone", "against-baseline"])
def test_a_real_report_is_written_in_the_documented_order_and_reads_back_equal(
    with_baseline: bool,
) -> None:
    report = _report(with_baseline)
    data = marshal(report)
    assert list(data) == [*RUN_KEYS, "cases"]  # ragcanary run adds none of the daemon's keys
    assert list(data["counts"]) == COUNTS_KEYS
    assert list(data["counts"]["outcomes"]) == list(OUTCOMES)
    assert [c["id"] for c in data["cases"]] == [c.id for c in CASES]
    for entry in data["cases"]:
        assert list(entry)[: len(CASE_KEYS)] == CASE_KEYS
    assert data["cases"][2]["scores"] == [0.6, None]  # NaN is written as null
    assert data["metrics_by_tag"]["faq"]
    stored = _as_stored(data)
    assert unmarshal(stored) == report
    assert marshal(unmarshal(stored)) == data
    # Equal as JSON text too: the same keys in the same order.
    assert ordered(marshal(unmarshal(stored))) == ordered(data)


def test_without_a_baseline_the_report_has_no_comparison_and_no_cosines() -> None:
    data = marshal(_report(with_baseline=False))
    assert data["baseline"] is None
    assert data["regressions"] == []
    for entry in data["cases"]:
        assert "vs_baseline" not in entry
        assert "embedding_cosine" not in entry
    # The query vectors are written all the same: a later run compares with them.
    assert [("query_vector" in c) for c in data["cases"]] == [True, True, True, False, True, False]


def test_against_a_baseline_the_comparison_drift_and_cosines_are_written_in_order() -> None:
    report = _report(with_baseline=True)
    data = marshal(report)
    assert list(data["baseline"]) == BASELINE_KEYS
    assert data["baseline"]["run_id"] == "base"
    assert data["baseline"]["embedding_drift"] == pytest.approx(1 - (1 + 0.5 + 0 + 1) / 4)
    assert data["baseline"]["embedding_changed_ratio"] == 0.5
    assert data["baseline"]["embedding_dimensions"] is None  # one length throughout
    assert {r["case"] for r in data["regressions"]} == {"lost"}
    assert {f["kind"] for f in data["failures"]} >= {"negative_leak"}
    cases = {c["id"]: c for c in data["cases"]}
    assert list(cases["turned"]) == [*CASE_KEYS, "vs_baseline", "embedding_cosine", "query_vector"]
    assert list(cases["turned"]["vs_baseline"]) == [
        "rbo",
        "jaccard",
        "entered",
        "left",
        "top_score_delta",
        "lost",
    ]
    assert cases["turned"]["vs_baseline"]["lost"] == []  # nothing judged relevant left
    assert cases["kept"]["embedding_cosine"] == 1.0
    assert cases["turned"]["embedding_cosine"] == pytest.approx(0.5, abs=1e-12)
    assert cases["lost"]["embedding_cosine"] is None  # embedded in both: null, not left out
    assert cases["lost"]["vs_baseline"]["left"] == ["d3"]
    # d3 left, nobody asked the index, and the query vector has no cosine (a zero vector).
    assert cases["lost"]["vs_baseline"]["lost"] == [{"id": "d3", "why": "query_moved"}]
    assert "embedding_cosine" not in cases["neg"]  # not embedded this time: left out
    assert "vs_baseline" not in cases["down"]  # not answered this time
    entries = {e.id: e for e in report.cases}
    assert entries["lost"].embedding_cosine is None
    assert entries["neg"].embedding_cosine is ABSENT
    assert entries["turned"].vector() == pytest.approx(_turned(math.pi / 3), abs=1e-7)
    assert unmarshal(_as_stored(data)) == report


def test_a_report_with_another_vector_length_writes_both_lengths() -> None:
    longer = _embedded(
        [(c, r.answer) for c, r in zip(CASES, CURRENT_RUN.results, strict=True)],
        [(1.0, 0.0, 0.0), *[_turned(0.0)] * 5],
        "current",
    )
    report = build_report(evaluate(longer, SETTINGS, BASELINE_RUN))
    data = marshal(report)
    assert ordered(data["baseline"]["embedding_dimensions"]) == ordered(
        {"baseline": 2, "current": 3}
    )
    assert data["cases"][0]["embedding_cosine"] is None
    assert report.baseline is not None
    assert report.baseline.embedding_dimensions == (2, 3)
    assert unmarshal(_as_stored(data)) == report


def test_the_daemons_keys_come_before_the_cases_and_read_back_equal() -> None:
    report = replace(
        _report(with_baseline=True),
        claim=RunClaim("core/search", "2026-11-22T12:00:00+00:00", "host-1-abc123", False),
        stale_labels=(
            StaleLabelEntry("lost", "d3", "missing", "2026-11-22T12:00:01+00:00"),
            StaleLabelEntry("kept", "d1", "not_returned"),
        ),
        index_lookup=IndexLookup("2026-11-22T11:00:00+00:00", 4, ("d3",), None),
    )
    data = marshal(report)
    assert list(data) == [*RUN_KEYS, *DAEMON_KEYS, "cases"]
    assert ordered(data["claim"]) == ordered(
        {
            "job": "core/search",
            "tick": "2026-11-22T12:00:00+00:00",
            "replica": "host-1-abc123",
            "claimed": False,
        }
    )
    assert ordered(data["stale_labels"]) == ordered(
        [
            {
                "case": "lost",
                "id": "d3",
                "reason": "missing",
                "looked_up_at": "2026-11-22T12:00:01+00:00",
            },
            {"case": "kept", "id": "d1", "reason": "not_returned"},  # no looked_up_at: left out
        ]
    )
    assert ordered(data["index_lookup"]) == ordered(
        {
            "at": "2026-11-22T11:00:00+00:00",
            "ids": 4,
            "left": ["d3"],
            "left_at": None,
        }
    )
    assert unmarshal(_as_stored(data)) == report
    assert marshal(unmarshal(_as_stored(data))) == data


@pytest.mark.parametrize(
    ("stale", "written"),
    [
        (ABSENT, "left out"),  # the daemon did not look
        (None, None),  # it looked and could not tell
        ((), []),  # it looked and found none
        ((StaleLabelEntry("c", "a", "missing"),), [{"case": "c", "id": "a", "reason": "missing"}]),
    ],
    ids=["absent", "null", "empty", "one"],
)
def test_stale_labels_left_out_null_and_empty_stay_apart(stale: Any, written: Any) -> None:
    report = replace(_report(with_baseline=False), stale_labels=stale)
    data = marshal(report)
    if written == "left out":
        assert "stale_labels" not in data
    else:
        assert "stale_labels" in data
        assert data["stale_labels"] == written
    back = unmarshal(_as_stored(data))
    assert back.stale_labels == stale
    assert (back.stale_labels is ABSENT) == (stale is ABSENT)
    assert (back.stale_labels is None) == (stale is None)
    assert marshal(back) == data


@pytest.mark.parametrize(
    "recall", [ABSENT, None, AnnRecall(10, 0.875, 8)], ids=["absent", "null", "measured"]
)
def test_ann_recall_is_left_out_of_a_diagnosis_older_than_it(recall: Any) -> None:
    """``diagnosis.ann_recall`` came later: left out, null (could not be told) and a value
    each read back as written."""
    report = _report(with_baseline=False)
    report = replace(report, diagnosis=Diagnosis("none", "no regression", ann_recall=recall))
    data = marshal(report)
    assert ("ann_recall" in data["diagnosis"]) == (recall is not ABSENT)
    back = unmarshal(_as_stored(data))
    assert back.diagnosis is not None
    assert back.diagnosis.ann_recall == recall
    assert ordered(marshal(back)) == ordered(data)


@pytest.mark.parametrize("short", [ABSENT, 0, 3], ids=["absent", "zero", "three"])
def test_the_short_count_is_left_out_of_a_report_older_than_it(short: Any) -> None:
    """``counts.short`` came later: a report without it reads back without it (not as 0)."""
    report = _report(with_baseline=False)
    report = replace(report, counts=replace(report.counts, short=short))
    data = marshal(report)
    assert ("short" in data["counts"]) == (short is not ABSENT)
    back = unmarshal(_as_stored(data))
    assert back.counts.short == short
    assert ordered(marshal(back)) == ordered(data)


@pytest.mark.parametrize(
    ("cosine", "written"),
    [(ABSENT, "left out"), (None, None), (0.25, 0.25)],
    ids=["absent", "null", "number"],
)
def test_embedding_cosine_left_out_and_null_stay_apart(cosine: Any, written: Any) -> None:
    vector = encode_vector((0.5, -0.25))
    entry = CaseEntry(
        id="c",
        query="q",
        kind="labelled",
        outcome="ok",
        ids=("a",),
        scores=(0.5,),
        latency_s=0.01,
        error=None,
        metrics={"rr": 1.0},
        embedding_cosine=cosine,
        query_vector=vector,
    )
    report = replace(_report(with_baseline=False), cases=(entry,))
    (data,) = marshal(report)["cases"]
    if written == "left out":
        assert list(data) == [*CASE_KEYS, "query_vector"]
    else:
        assert list(data) == [*CASE_KEYS, "embedding_cosine", "query_vector"]
        assert data["embedding_cosine"] == written
    (back,) = unmarshal(_as_stored(marshal(report))).cases
    assert back == entry
    assert (back.embedding_cosine is ABSENT) == (cosine is ABSENT)
    assert (back.embedding_cosine is None) == (cosine is None)


# A --baseline file edited by hand: NaN is what Python's json reads from a bare NaN.
ODD = """{
  "suite": "core", "target": 7, "run_id": 12345,
  "started_at": "last tuesday", "duration_s": "1.5", "outcome": "ok", "coverage": NaN,
  "metrics": {"mrr": "high", "hit_rate@1": 1, "ndcg@3": true, "recall@1": Infinity},
  "metrics_by_tag": ["not", "a", "map"],
  "baseline": "base1",
  "failures": [{"kind": "floor", "amount": "a lot"}, "not an object"],
  "regressions": [{"case": 3, "metric": "mrr", "baseline": null, "current": "0"}],
  "cases": [
    {"id": 1, "query": "q", "kind": "labelled", "ids": [1, 2.5, "d3"],
     "scores": ["0.9", NaN, 0.5], "latency_s": true, "metrics": {"rr": NaN},
     "vs_baseline": "changed", "embedding_cosine": "0.9", "query_vector": [0.1, 0.2]},
    {"id": "broken", "ids": "d1", "scores": null, "error": "timeout after 5 s"},
    "not an object"
  ]
}"""


def test_a_hand_written_report_with_odd_values_reads_them_as_missing() -> None:
    data = json.loads(ODD)
    assert missing_keys(data) == []
    report = unmarshal(data)
    assert (report.suite, report.target, report.run_id) == ("core", "7", "12345")
    assert report.started_at.timestamp() == 0  # unreadable: the epoch
    assert report.duration_s is None  # a string where a number belongs
    assert report.coverage is None  # NaN
    assert report.metrics == {"mrr": None, "hit_rate@1": 1.0, "ndcg@3": None, "recall@1": None}
    assert report.metrics_by_tag == {}
    assert report.baseline is None
    assert len(report.failures) == 1
    assert report.failures[0].kind == "floor"
    assert report.failures[0].amount is None
    (regression,) = report.regressions
    assert (regression.case, regression.metric) == ("3", "mrr")
    assert math.isnan(regression.baseline)  # null: not a number
    assert math.isnan(regression.current)  # a string: not a number
    # No counts at all: none of anything, no outcome counted.
    assert report.counts == Counts(0, 0, 0, 0, 0, {})
    assert report.unanswered() == {}
    first, broken = report.cases  # what is not an object is skipped
    assert first.id == "1"
    assert first.ids == ("1", "2.5", "d3")  # numbers as ids read as their text
    assert first.scores == (None, None, 0.5)
    assert first.latency_s is None
    assert first.metrics == {"rr": None}
    assert first.vs_baseline is None
    assert first.embedding_cosine is None  # present, not a number: null, not left out
    assert first.query_vector is None
    assert first.vector() is None
    assert first.outcome == "ok"  # no outcome and no error: answered
    assert (broken.ids, broken.scores, broken.outcome) == ((), (), "bad_response")
    assert broken.error == "timeout after 5 s"
    assert not broken.answered
    # What was read is a report like any other: it is written as JSON without NaN.
    written = _as_stored(marshal(report))
    assert written["coverage"] is None
    assert written["cases"][0]["embedding_cosine"] is None
    assert written["regressions"] == [
        {"case": "3", "metric": "mrr", "baseline": None, "current": None}
    ]
    again = unmarshal(written)
    assert replace(again, regressions=()) == replace(report, regressions=())
    assert marshal(again) == written


def test_a_report_of_only_its_required_keys_reads_as_an_empty_run() -> None:
    report = unmarshal({"suite": "core", "target": "search", "run_id": "r", "cases": []})
    assert report.pair == ("core", "search")
    assert (report.outcome, report.duration_s, report.coverage) == ("", None, None)
    assert (report.metrics, report.baseline, report.failures, report.cases) == ({}, None, (), ())
    assert report.stale_labels is ABSENT
    assert report.claim is None
    assert report.index_lookup is None
    assert report.finished_at() == report.started_at


def test_odd_daemon_keys_read_as_missing_but_a_null_stale_list_stays_null() -> None:
    data = report_data(
        cases=[case_entry("c", ids=["a"])],
        claim="yes",
        stale_labels=None,
        index_lookup=[1, 2],
    )
    report = unmarshal(data)
    assert report.claim is None
    assert report.stale_labels is None
    assert report.index_lookup is None
    odd = unmarshal(report_data(stale_labels={"case": "c"}))
    assert odd.stale_labels is None  # not a list: the run could not tell
    mixed = unmarshal(report_data(stale_labels=[{"case": "c", "id": 5}, "x"]))
    assert mixed.stale_labels == (StaleLabelEntry("c", "5", "", None),)


def test_missing_keys_names_each_required_key_a_report_lacks() -> None:
    assert REQUIRED == ("suite", "target", "run_id", "cases")
    assert missing_keys({}) == ["suite", "target", "run_id", "cases"]
    complete = report_data()
    assert missing_keys(complete) == []
    for key in REQUIRED:
        assert missing_keys({k: v for k, v in complete.items() if k != key}) == [key]
    assert missing_keys({**complete, "cases": {"c": {}}}) == ["cases"]  # not a list
    assert missing_keys({**complete, "cases": None}) == ["cases"]
    # Only those: a report without its other keys is still read.
    assert missing_keys({k: complete[k] for k in REQUIRED}) == []
