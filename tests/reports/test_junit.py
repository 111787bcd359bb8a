"""Tests of rendering a run report as JUnit XML."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from factories import case_entry, run_report
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.report_json import unmarshal
from ragcanary.reports.junit import render_junit


def case(case_id: str, **overrides: Any) -> dict[str, Any]:
    """One answered, passing case of a report."""
    base: dict[str, Any] = {
        "ids": ["d1", "d2"],
        "scores": [0.9, 0.5],
        "metrics": {"hit_rate@5": 1.0, "rr": 1.0},
    }
    return case_entry(case_id, **(base | overrides))


def report(**overrides: Any) -> dict[str, Any]:
    """A passing report with three cases and a baseline."""
    base: dict[str, Any] = {
        "run_id": "ab12",
        "target": "docs-search",
        "started_at": "2026-11-22T03:00:00+00:00",
        "duration_s": 1.25,
        "metrics": {"hit_rate@5": 1.0, "mrr": 0.9},
        "baseline": {"run_id": "base1", "deltas": {"hit_rate@5": 0.0}},
        "counts": {"cases": 3, "answered": 3, "labelled": 2, "negative": 1, "label_free": 0},
        "cases": [
            case("alpha"),
            case("beta", latency_s=0.5),
            case("neg", kind="negative", ids=["d7"], scores=[0.8], metrics={}),
        ],
    }
    return run_report(**(base | overrides))


def parse(xml: str) -> ET.Element:
    """Parse rendered JUnit and return its single testsuite."""
    root = ET.fromstring(xml.encode("utf-8"))
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    return suite


def find_case(suite: ET.Element, name: str) -> ET.Element:
    """The testcase with ``name``."""
    [element] = [tc for tc in suite.findall("testcase") if tc.get("name") == name]
    return element


def test_passing_report_has_one_testcase_per_canary_plus_run() -> None:
    """A clean run is all passes, named after suite and target, with latencies as times."""
    suite = parse(render_junit(report()))
    assert suite.get("name") == "ragcanary.core.docs-search"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    assert suite.get("time") == "1.250"
    assert suite.get("timestamp") == "2026-11-22T03:00:00+00:00"
    testcases = suite.findall("testcase")
    assert [(tc.get("classname"), tc.get("name"), tc.get("time")) for tc in testcases] == [
        ("ragcanary.core.docs-search", "alpha", "0.020"),
        ("ragcanary.core.docs-search", "beta", "0.500"),
        ("ragcanary.core.docs-search", "neg", "0.020"),
        ("ragcanary.core.docs-search", "run", "0.000"),
    ]
    assert all(len(tc) == 0 for tc in testcases)
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {
        "run_id": "ab12",
        "outcome": "ok",
        "coverage": "1.0",
        "baseline_run_id": "base1",
    }


def test_output_starts_with_a_utf8_xml_declaration() -> None:
    """CI parsers get a declared UTF-8 document."""
    assert render_junit(report()).startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')


def test_regression_report_fails_cases_and_the_run() -> None:
    """Per-case drops and leaks fail their canaries; floors and drops fail the run testcase."""
    rendered = render_junit(
        report(
            outcome="regression",
            regressions=[
                {"case": "alpha", "metric": "hit_rate@5", "baseline": 1.0, "current": 0.0},
                {"case": "alpha", "metric": "ndcg@10", "baseline": 0.9, "current": 0.25},
            ],
            failures=[
                {
                    "kind": "floor",
                    "metric": "hit_rate@5",
                    "case": None,
                    "message": "hit_rate@5 0.62 is below the floor 0.80",
                },
                {
                    "kind": "drop",
                    "metric": "mrr",
                    "case": None,
                    "message": "mrr dropped by 0.10",
                },
                {
                    "kind": "negative_leak",
                    "metric": None,
                    "case": "neg",
                    "message": "neg: d7 scored 0.80 >= 0.60",
                },
            ],
        )
    )
    suite = parse(rendered)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "3", "0")

    alpha = find_case(suite, "alpha").find("failure")
    assert alpha is not None
    assert alpha.get("type") == "regression"
    assert alpha.get("message") == "hit_rate@5 1 -> 0; ndcg@10 0.9 -> 0.25"
    assert "query: query alpha" in (alpha.text or "")
    assert "returned: d1 (0.9), d2 (0.5)" in (alpha.text or "")

    leak = find_case(suite, "neg").find("failure")
    assert leak is not None
    assert (leak.get("type"), leak.get("message")) == (
        "negative_leak",
        "neg: d7 scored 0.80 >= 0.60",
    )
    assert find_case(suite, "beta").find("failure") is None

    run = find_case(suite, "run").find("failure")
    assert run is not None
    assert run.get("type") == "floor,drop"
    assert run.get("message") == "hit_rate@5 0.62 is below the floor 0.80; mrr dropped by 0.10"


def test_unavailable_report_errors_unanswered_cases_and_the_run() -> None:
    """Unanswered canaries are errors typed by outcome; the run is an error, not a failure."""
    rendered = render_junit(
        report(
            outcome="unavailable",
            coverage=1 / 3,
            metrics={},
            baseline=None,
            failures=[
                {
                    "kind": "coverage",
                    "metric": None,
                    "case": None,
                    "message": "coverage 0.33 is below min_coverage 0.90",
                }
            ],
            cases=[
                case("alpha", outcome="timeout", ids=[], scores=[], error="timed out after 5s"),
                case("beta", outcome="http_5xx", ids=[], scores=[], error=None, metrics={}),
                case("empty", outcome="empty", ids=[], scores=[], metrics={}),
            ],
        )
    )
    suite = parse(rendered)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "3")
    alpha = find_case(suite, "alpha").find("error")
    assert alpha is not None
    assert (alpha.get("type"), alpha.get("message")) == ("timeout", "timed out after 5s")
    assert "returned: (nothing)" in (alpha.text or "")
    beta = find_case(suite, "beta").find("error")
    assert beta is not None
    assert (beta.get("type"), beta.get("message")) == ("http_5xx", "http_5xx")
    assert len(find_case(suite, "empty")) == 0
    run = find_case(suite, "run").find("error")
    assert run is not None
    assert run.get("type") == "unavailable"
    assert run.get("message") == "coverage 0.33 is below min_coverage 0.90"
    assert "baseline_run_id" not in {p.get("name") for p in suite.iter("property")}


def test_failure_naming_an_unknown_case_is_kept_on_the_run() -> None:
    """A failure whose case is not in the report is not lost: the run testcase carries it."""
    failure = {"kind": "min_score", "metric": None, "case": "ghost", "message": "ghost too low"}
    suite = parse(render_junit(report(outcome="regression", failures=[failure])))
    run = find_case(suite, "run").find("failure")
    assert run is not None
    assert run.get("message") == "ghost too low"


@pytest.mark.parametrize(
    "text",
    [
        "quote \" and apostrophe ' <tag> & ampersand",
        "line\nbreak\ttab\r",
        "control \x00\x01\x1b chars",
        "lone surrogate \ud800 and emoji 🦜 and ümlaut",
        "]]> cdata end",
    ],
)
def test_special_characters_in_ids_queries_and_errors_survive_a_round_trip(text: str) -> None:
    """Anything in an id, query or error message yields well-formed XML that parses back."""
    rendered = render_junit(
        report(
            suite="co<re",
            cases=[case(text, query=text, outcome="bad_response", error=text)],
        )
    )
    suite = parse(rendered)
    assert suite.get("name") == "ragcanary.co<re.docs-search"
    [first, _run] = suite.findall("testcase")
    error = first.find("error")
    assert error is not None
    # XML cannot carry control characters or lone surrogates: they become U+FFFD.
    expected = "".join(
        "\ufffd" if (ord(c) < 32 and c not in "\t\n\r") or 0xD800 <= ord(c) <= 0xDFFF else c
        for c in text
    )
    assert first.get("name") == expected
    assert error.get("message") == expected
    # XML parsers read a raw carriage return in text as a line feed.
    assert f"query: {expected}".replace("\r", "\n") in (error.text or "")


def test_minimal_report_without_optional_sections_renders() -> None:
    """Missing failures, regressions, baseline and cases still give a valid one-test suite."""
    suite = parse(render_junit(unmarshal({"suite": "s", "target": "t", "outcome": "ok"})))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
    assert suite.get("time") == "0.000"


def test_rendering_does_not_modify_the_report() -> None:
    """The renderer is pure: the report dict is untouched."""
    original = report(
        regressions=[{"case": "alpha", "metric": "mrr", "baseline": 1.0, "current": 0.5}]
    )
    before = copy.deepcopy(original)
    render_junit(original)
    assert original == before


outcomes = st.sampled_from(["ok", "empty", "timeout", "connect_error", "http_5xx"])


@settings(max_examples=50, deadline=None)
@given(
    cases=st.lists(
        st.tuples(st.text(min_size=1, max_size=6), outcomes, st.booleans()),
        max_size=8,
        unique_by=lambda t: t[0],
    ),
    run_failed=st.booleans(),
)
def test_counts_match_the_testcases(cases: list[tuple[str, str, bool]], run_failed: bool) -> None:
    """tests, failures and errors always equal what the testcases carry."""
    rendered = render_junit(
        report(
            cases=[case(cid, outcome=outcome) for cid, outcome, _ in cases],
            regressions=[
                {"case": cid, "metric": "mrr", "baseline": 1.0, "current": 0.0}
                for cid, _, regressed in cases
                if regressed
            ],
            failures=[{"kind": "floor", "metric": "mrr", "case": None, "message": "m"}]
            if run_failed
            else [],
        )
    )
    suite = parse(rendered)
    answered = {"ok", "empty"}
    assert suite.get("tests") == str(len(cases) + 1)
    failed = sum(regressed and outcome in answered for _, outcome, regressed in cases)
    assert suite.get("failures") == str(failed + run_failed)
    assert suite.get("errors") == str(sum(outcome not in answered for _, outcome, _ in cases))
