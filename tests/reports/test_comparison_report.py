"""The comparison of several targets as JSON, Markdown and JUnit, from plain figures."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from ragcanary.measure.target_comparison import Figures, TargetComparison, TargetResult
from ragcanary.reports.comparison import (
    comparison_data,
    dump_comparison,
    metric_groups,
    render_comparison_junit,
    render_comparison_markdown,
)


def _comparison() -> TargetComparison:
    ref = TargetResult(
        name="bm25",
        run_id="r1",
        is_reference=True,
        coverage=1.0,
        latency_p50_s=0.012,
        latency_p95_s=0.03,
        suite=Figures({"hit_rate@1": 0.8, "hit_rate@5": 0.9, "mrr": 0.85}),
        tags={"json": Figures({"hit_rate@1": 1.0, "hit_rate@5": 1.0, "mrr": 1.0})},
    )
    worse = TargetResult(
        name="trunc|ated",
        run_id="r2",
        is_reference=False,
        coverage=0.95,
        latency_p50_s=0.01,
        latency_p95_s=None,
        suite=Figures(
            metrics={"hit_rate@1": 0.4, "hit_rate@5": 0.9, "mrr": 0.5},
            deltas={"hit_rate@1": -0.4, "hit_rate@5": 0.0, "mrr": -0.35},
            p_values={"hit_rate@1": 0.001, "hit_rate@5": 1.0, "mrr": 0.004},
            p_values_corrected={"hit_rate@1": 0.002, "hit_rate@5": 1.0, "mrr": 0.008},
            significant=("hit_rate@1", "mrr"),
        ),
        tags={
            "json": Figures(
                metrics={"hit_rate@1": 0.5},
                deltas={"hit_rate@1": -0.5},
                p_values={"hit_rate@1": 0.25},
                p_values_corrected={"hit_rate@1": 0.5},
            )
        },
        worse=("hit_rate@1", "mrr"),
    )
    return TargetComparison("core", "bm25", 0.05, (ref, worse), ("json",))


def test_json_has_the_contract_s_shape() -> None:
    data = comparison_data(_comparison())
    assert json.loads(dump_comparison(_comparison())) == data
    assert list(data) == ["suite", "reference", "correction", "significance", "targets", "tags"]
    assert data["correction"] == "holm"
    assert data["targets"]["bm25"] == {
        "metrics": {"hit_rate@1": 0.8, "hit_rate@5": 0.9, "mrr": 0.85},
        "run_id": "r1",
        "coverage": 1.0,
        "latency_p50_s": 0.012,
        "latency_p95_s": 0.03,
    }
    candidate = data["targets"]["trunc|ated"]
    assert candidate["deltas"]["hit_rate@1"] == -0.4
    assert candidate["p_values"]["mrr"] == 0.004
    assert candidate["p_values_corrected"]["mrr"] == 0.008
    assert candidate["significant"] == ["hit_rate@1", "mrr"]
    assert candidate["worse"] is True
    assert candidate["latency_p95_s"] is None
    assert data["tags"] == {
        "json": {
            "bm25": {"metrics": {"hit_rate@1": 1.0, "hit_rate@5": 1.0, "mrr": 1.0}},
            "trunc|ated": {
                "metrics": {"hit_rate@1": 0.5},
                "deltas": {"hit_rate@1": -0.5},
                "p_values": {"hit_rate@1": 0.25},
                "p_values_corrected": {"hit_rate@1": 0.5},
                "significant": [],
            },
        }
    }


def test_a_single_metric_family_joins_the_table_before_it() -> None:
    assert metric_groups(_comparison()) == [["hit_rate@1", "hit_rate@5", "mrr"]]


def test_markdown_marks_significant_cells_and_names_the_worse_target() -> None:
    text = render_comparison_markdown(_comparison())
    assert text.startswith("## ❌ worse than the reference: ragcanary compare on suite `core`")
    assert "- trunc\\|ated is significantly worse than bm25: hit\\_rate@1, mrr" in text
    assert "Holm" in text
    rows = [line for line in text.splitlines() if line.startswith("| `trunc\\|ated`")]
    assert rows[0] == "| `trunc\\|ated` | 95% | 10.0 ms | \u2013 |"
    assert rows[1] == (
        "| `trunc\\|ated` | 0.4000 ▼<br>-0.4000<br>p 0.0020 | 0.9000<br>+0.0000<br>p 1.0000 "
        "| 0.5000 ▼<br>-0.3500<br>p 0.0080 |"
    )
    # The tag's table: not significant there after the correction, so not marked.
    assert "| `trunc\\|ated` | 0.5000<br>-0.5000<br>p 0.5000 | \u2013 | \u2013 |" in text
    assert "<details><summary>tag json</summary>" in text


def test_junit_fails_the_worse_candidate_only() -> None:
    root = ET.fromstring(render_comparison_junit(_comparison()).split("\n", 1)[1])
    assert root.get("failures") == "1"
    (case,) = root.iter("testcase")
    assert case.get("name") == "trunc|ated vs bm25"
    failure = case.find("failure")
    assert failure is not None
    assert "hit_rate@1: 0.4000 (difference -0.4000, p 0.0010, Holm-corrected 0.0020)" in (
        failure.text or ""
    )
