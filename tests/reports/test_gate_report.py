"""The gate's verdict, exit code and JSON from its two runs' reports (docs/gate.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from factories import run_report

from ragcanary.reports.gate import GateResult, gate_json, render_gate
from ragcanary.reports.markdown import render_gate_markdown
from ragcanary.reports.terminal import plain_lines

CONFIG = {"kind": "config", "message": "targets.next.results: 'hits' matched no answer"}
COVERAGE = {"kind": "coverage", "message": "coverage 0% is below min_coverage 90%"}
DROP = {"kind": "drop", "message": "mrr dropped 0.3", "metric": "mrr", "amount": 0.3}
BASELINE = {
    "run_id": "stable-run",
    "deltas": {"mrr": -0.3},
    "p_values": {"mrr": 0.01},
    "ci": {"mrr": [-0.5, -0.1]},
    "win_tie_loss": {"mrr": [0, 7, 3]},
}


def _result(stable: dict[str, Any], candidate: dict[str, Any]) -> GateResult:
    return GateResult(
        "core",
        run_report("stable-run", target="live", **stable),
        run_report("next-run", target="next", **candidate),
    )


@pytest.mark.parametrize(
    ("stable", "candidate", "verdict", "code"),
    [
        ({}, {}, "ok", 0),
        # The stable run judged alone (its floors) does not decide the gate: the candidate does.
        ({"outcome": "regression"}, {}, "ok", 0),
        ({}, {"outcome": "regression", "failures": [DROP]}, "regression", 1),
        ({}, {"outcome": "unavailable", "failures": [COVERAGE]}, "unavailable", 3),
        ({"outcome": "unavailable", "failures": [COVERAGE]}, {}, "unavailable", 3),
        ({}, {"outcome": "unavailable", "failures": [CONFIG]}, "config", 2),
        # A config the answers do not fit is said before another target's outage.
        (
            {"outcome": "unavailable", "failures": [COVERAGE]},
            {"outcome": "unavailable", "failures": [CONFIG]},
            "config",
            2,
        ),
    ],
)
def test_the_verdict_and_exit_code_follow_both_runs(
    stable: dict[str, Any], candidate: dict[str, Any], verdict: str, code: int
) -> None:
    result = _result(stable, candidate)
    assert (result.verdict, result.exit_code) == (verdict, code)
    data = json.loads(gate_json(result))
    assert (data["verdict"], data["exit_code"]) == (verdict, code)


def test_the_report_holds_both_sides_the_comparison_and_both_full_reports() -> None:
    metrics = {"mrr": 0.7}
    result = _result(
        {"metrics": {"mrr": 1.0}},
        {"outcome": "regression", "failures": [DROP], "metrics": metrics, "baseline": BASELINE},
    )
    data = json.loads(gate_json(result))
    assert list(data) == [
        "suite",
        "verdict",
        "exit_code",
        "stable",
        "candidate",
        "reasons",
        "diagnosis",
        "reports",
    ]
    assert data["stable"] == {
        "target": "live",
        "run_id": "stable-run",
        "outcome": "ok",
        "coverage": 1.0,
        "metrics": {"mrr": 1.0},
    }
    candidate = data["candidate"]
    assert candidate["deltas"] == {"mrr": -0.3}
    assert candidate["p_values"] == {"mrr": 0.01}
    assert candidate["ci"] == {"mrr": [-0.5, -0.1]}
    assert candidate["win_tie_loss"] == {"mrr": [0, 7, 3]}
    assert candidate["dropped"] == ["mrr"]
    assert data["reasons"] == ["mrr dropped 0.3"]
    assert data["diagnosis"] is None  # a hand-written report without one
    assert data["reports"]["candidate"]["baseline"]["run_id"] == "stable-run"


def test_the_terminal_says_the_verdict_first_and_what_to_do_last() -> None:
    result = _result(
        {"metrics": {"mrr": 1.0}},
        {
            "outcome": "regression",
            "failures": [DROP],
            "metrics": {"mrr": 0.7},
            "baseline": BASELINE,
        },
    )
    lines = [str(line) for part in render_gate(result).renderables for line in _lines(part)]
    assert lines[0] == "WORSE  gate · suite core · candidate next vs stable live · exit 1"
    assert any(
        line.split()
        == ["mrr", "1.0000", "0.7000", "-0.3000", "0.0100", "[-0.500,", "-0.100]", "0/7/3"]
        for line in lines
    ), lines
    assert "✗ mrr dropped 0.3" in lines
    assert lines[-1] == "next is worse than live: do not promote it"


def test_the_markdown_escapes_target_names_and_heads_with_the_verdict() -> None:
    result = GateResult(
        "core",
        run_report("stable-run", target="live"),
        run_report("next-run", target="next*_[x]", outcome="unavailable", failures=[COVERAGE]),
    )
    text = render_gate_markdown(result)
    assert text.startswith(
        "# ⚠️ unavailable: ragcanary gate of `next*_[x]` against `live` on suite `core`\n"
    )
    assert "**Verdict** `unavailable` · **Exit** 3" in text


def _lines(part: Any) -> list[Any]:
    from rich.table import Table

    return plain_lines(part) if isinstance(part, Table) else [part]
