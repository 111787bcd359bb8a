"""A canary's verdict in one run, from its query outcome and what the run's judgement said."""

from __future__ import annotations

from typing import Any

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.case_verdict import CASE_VERDICTS, RunFindings, case_verdict, case_verdicts
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.run_report import build_report
from ragcanary.suites.judge import settings_for


@pytest.mark.parametrize(
    ("outcome", "regressed", "failed", "verdict"),
    [
        ("ok", False, (), "ok"),
        ("empty", False, (), "ok"),  # an empty list is an answer
        ("ok", True, (), "regressed"),
        ("empty", True, (), "regressed"),  # every relevant id gone: answered, and regressed
        ("ok", False, ("negative_leak",), "leaked"),
        ("ok", False, ("min_score",), "missed_min_score"),
        ("ok", True, ("min_score",), "regressed"),
        ("timeout", True, ("negative_leak",), "unanswered"),  # nothing judged of no answer
        ("http_5xx", False, (), "unanswered"),
        ("embedding_error", False, (), "unanswered"),
        (None, False, (), "unanswered"),
        (["odd"], False, (), "unanswered"),  # a hand-written report's value
    ],
)
def test_the_verdict_puts_a_failed_query_first_then_a_leak_a_regression_a_min_score(
    outcome: Any, regressed: bool, failed: tuple[str, ...], verdict: str
) -> None:
    assert case_verdict(outcome, regressed, failed) == verdict
    assert verdict in CASE_VERDICTS


def test_findings_read_only_the_entries_that_name_a_case() -> None:
    regressions = [{"case": "a", "metric": "rr"}, {"case": "a", "metric": "ndcg@5"}, "junk", {}]
    failures = [
        {"kind": "drop", "case": None, "metric": "mrr"},  # about the run, not a case
        {"kind": "negative_leak", "case": "n"},
        {"kind": "min_score", "case": "n"},
        7,
    ]
    findings = RunFindings.of(regressions, failures)
    assert findings.regressed == {"a"}
    assert findings.failed == {"n": {"negative_leak", "min_score"}}
    assert RunFindings.of(None, {"not": "a list"}) == RunFindings()


def test_verdicts_of_a_real_run_count_what_the_run_counted() -> None:
    """regressed and leaked name exactly the cases ragcanary_regressed_cases and
    ragcanary_negative_leaks count, and a case that answered and dropped nothing is ok."""
    lost, kept = case("lost", ["a"]), case("kept", ["k"])
    neg = case("neg", [], max_score=0.6)
    quiet = case("quiet", [], max_score=0.6)
    down = case("down", ["z"])
    baseline = run(
        [
            (lost, answer(["a", "b"])),
            (kept, answer(["k"])),
            (neg, answer(["n"], [0.2])),
            (quiet, answer(["q"], [0.1])),
            (down, answer(["z"])),
        ],
        "base",
    )
    current = run(
        [
            (lost, answer(["b"])),  # its only relevant id left
            (kept, answer(["k"])),
            (neg, answer(["n"], [0.9])),  # scored above its max_score
            (quiet, answer(["q"], [0.1])),
            (down, answer([], outcome="timeout")),
        ]
    )
    # One query of five failing must not make the run unavailable: that judges no checks.
    suite = SuiteConfig(cases="suite.yaml", targets=["search"], min_coverage=0.5)
    report = build_report(evaluate(current, settings_for(suite), baseline))
    verdicts = case_verdicts(report)
    assert verdicts == {
        "lost": "regressed",
        "kept": "ok",
        "neg": "leaked",
        "quiet": "ok",
        "down": "unanswered",
    }
    counted = {r.case for r in report.regressions}
    assert {c for c, v in verdicts.items() if v == "regressed"} == counted
    leaks = {f.case for f in report.failures if f.kind == "negative_leak"}
    assert {c for c, v in verdicts.items() if v == "leaked"} == leaks
