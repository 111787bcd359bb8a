"""A target's other endpoints against its url: RBO per canary, the report, and the diagnosis."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.endpoints import EndpointRun, compare_endpoints
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.results import Outcome, RunResult
from ragcanary.measure.run_report import ABSENT, build_report
from ragcanary.measure.settings import Settings
from ragcanary.suites.judge import settings_for

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CASES = [case(f"c{i}", [f"d{i}"]) for i in range(8)]
ALIKE = ["x", "y", "z"]
OTHERS = ["p", "q", "r", "s"]  # what a canary that lost its document returns instead (as long)


def _settings(**thresholds: object) -> Settings:
    config = SuiteConfig(cases="s.yaml", targets=["t"], k=[1, 3], thresholds=thresholds)
    return settings_for(config)


def _run(changed: dict[int, list[str]], run_id: str = "now") -> RunResult:
    """Every canary finds its document first, but those in ``changed``, which return those."""
    return run(
        [(c, answer(changed.get(i, [f"d{i}", *ALIKE]))) for i, c in enumerate(CASES)], run_id
    )


def _endpoint(
    name: str, changed: dict[int, list[str]], failed: Outcome | None = None
) -> EndpointRun:
    """An endpoint that answers like ``_run(changed)``, or fails every query with ``failed``."""
    if failed is not None:
        return EndpointRun(
            name,
            f"http://{name}:8088/search",
            run([(c, answer([], outcome=failed)) for c in CASES]),
        )
    return EndpointRun(name, f"http://{name}:8088/search", _run(changed, name))


def test_an_endpoint_answering_alike_overlaps_fully_on_every_canary() -> None:
    [same] = compare_endpoints(_run({}), [_endpoint("eu", {})])
    assert same.asked == same.answered == 8
    assert same.rbo_min == same.rbo_mean == 1.0
    assert same.differing() == ()
    assert same.unanswered == {}
    assert same.error is None


def test_each_canary_answered_otherwise_has_its_own_rbo() -> None:
    """One canary swapped its first two results, another returned other documents."""
    [eu] = compare_endpoints(_run({}), [_endpoint("eu", {2: ["x", "d2", "y", "z"], 5: ["q", "r"]})])
    assert eu.differing() == ("c2", "c5")
    assert eu.overlaps["c5"] == 0.0
    assert 0.7 < eu.overlaps["c2"] < 1.0
    assert eu.rbo_min == 0.0
    assert eu.rbo_mean == pytest.approx((6 + eu.overlaps["c2"]) / 8)
    assert eu.diverged(0.7) == ("c5",)


def test_an_endpoint_that_answers_nothing_is_an_outage_of_that_endpoint() -> None:
    [down] = compare_endpoints(_run({}), [_endpoint("eu", {}, failed="connect_error")])
    assert (down.asked, down.answered) == (8, 0)
    assert down.rbo_min is None
    assert down.rbo_mean is None
    assert down.unanswered == {"connect_error": 8}
    assert down.error == "c0: simulated connect_error"


def test_a_canary_the_url_did_not_answer_is_not_compared() -> None:
    current = _run({})
    current = replace(
        current, results=(replace(current.results[0], answer=answer([], outcome="timeout")),
                          *current.results[1:])
    )  # fmt: skip
    [eu] = compare_endpoints(current, [_endpoint("eu", {0: ["q"]})])
    assert "c0" not in eu.overlaps
    assert eu.rbo_min == 1.0


def test_a_diverging_endpoint_leads_a_regression_no_lost_id_explains() -> None:
    """Five canaries lost their documents, nothing says why, and the replica answers those
    five otherwise: the replicas disagree."""
    lost = {i: OTHERS for i in range(5)}
    judged = evaluate(_run(lost), _settings(), _run({}, "base"), None, [_endpoint("eu", {})])
    assert judged.verdict.outcome == "regression"
    diagnosis = judged.diagnosis
    assert diagnosis is not None
    assert diagnosis.cause == "replica_divergence"
    assert diagnosis.summary.startswith("endpoint eu answers 5 canaries unlike the target's url")
    assert diagnosis.summary.endswith(": c0, c1, c2, c3, c4")
    causes = {c.cause: c for c in diagnosis.causes}
    assert set(causes) == {"replica_divergence", "unknown"}
    assert causes["replica_divergence"].cases == ("c0", "c1", "c2", "c3", "c4")
    assert "endpoint eu (http://eu:8088/search)" in causes["replica_divergence"].evidence
    without = evaluate(_run(lost), _settings(), _run({}, "base"))
    assert without.diagnosis is not None
    assert without.diagnosis.cause == "unknown"


def test_a_known_lost_id_cause_leads_and_the_divergence_is_listed_beside_it() -> None:
    lost = {i: OTHERS for i in range(5)}
    gone = IndexEvidence(frozenset(f"d{i}" for i in range(5)), AT, 0.01)
    judged = evaluate(_run(lost), _settings(), _run({}, "base"), gone, [_endpoint("eu", {})])
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "index_lost"
    assert [c.cause for c in judged.diagnosis.causes] == ["index_lost", "replica_divergence"]


def test_a_passing_run_stays_none_and_still_lists_a_diverging_endpoint() -> None:
    """The url is fine, a replica is not: the run passes, and the divergence is on record."""
    endpoints = [_endpoint("eu", {3: ["q", "r"]}), _endpoint("us", {})]
    judged = evaluate(_run({}), _settings(), _run({}, "base"), None, endpoints)
    assert judged.verdict.outcome == "ok"
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "none"
    [listed] = judged.diagnosis.causes
    assert (listed.cause, listed.cases) == ("replica_divergence", ("c3",))
    assert "endpoint us" not in listed.evidence


@pytest.mark.parametrize(
    ("thresholds", "diverged"),
    [
        pytest.param({}, False, id="default-0.7"),
        pytest.param({"min_rank_overlap": 0.95}, True, id="stricter"),
        pytest.param({"min_rank_overlap": None}, False, id="off-uses-the-default"),
    ],
)
def test_an_endpoint_diverges_under_the_suite_s_min_rank_overlap(
    thresholds: dict[str, object], diverged: bool
) -> None:
    """A swap of the first two results: RBO about 0.9, different but within 0.7."""
    endpoint = _endpoint("eu", {2: ["x", "d2", "y", "z"]})
    judged = evaluate(_run({}), _settings(**thresholds), None, None, [endpoint])
    assert judged.diagnosis is not None
    listed = [c.cause for c in judged.diagnosis.causes]
    assert listed == (["replica_divergence"] if diverged else [])
    reported = build_report(judged).endpoints
    assert isinstance(reported, Mapping)
    assert reported["eu"].diverged == ("c2",)  # differs, whether or not it diverged


def test_an_endpoint_outage_changes_neither_the_verdict_nor_the_cause() -> None:
    lost = {i: OTHERS for i in range(5)}
    down = [_endpoint("eu", {}, failed="http_5xx")]
    judged = evaluate(_run(lost), _settings(), _run({}, "base"), None, down)
    plain = evaluate(_run(lost), _settings(), _run({}, "base"))
    assert judged.verdict == plain.verdict
    assert judged.diagnosis == plain.diagnosis


def test_the_endpoints_are_in_the_report_and_read_back_equal() -> None:
    endpoints = [_endpoint("eu", {5: ["q", "r"]}), _endpoint("us", {}, failed="timeout")]
    report = build_report(evaluate(_run({}), _settings(), None, None, endpoints))
    data = marshal(report)
    assert data["endpoints"] == {
        "eu": {"url": "http://eu:8088/search", "asked": 8, "answered": 8, "rbo_min": 0.0,
               "rbo_mean": 0.875, "diverged": ["c5"], "unanswered": {}, "error": None},
        "us": {"url": "http://us:8088/search", "asked": 8, "answered": 0, "rbo_min": None,
               "rbo_mean": None, "diverged": [], "unanswered": {"timeout": 8},
               "error": "c0: simulated timeout"},
    }  # fmt: skip
    assert list(data).index("endpoints") == list(data).index("counts") + 1
    assert unmarshal(data) == report


def test_a_target_without_endpoints_writes_no_endpoints_key() -> None:
    report = build_report(evaluate(_run({}), _settings()))
    assert report.endpoints is ABSENT
    data = marshal(report)
    assert "endpoints" not in data
    assert unmarshal(data) == report
