"""Tests of rendering a run report as a Markdown pull-request comment."""

from __future__ import annotations

from typing import Any

import pytest
from factories import case_entry, run_report
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.report_json import unmarshal
from ragcanary.reports.markdown import render_markdown

BASELINE: dict[str, Any] = {
    "run_id": "base1",
    "deltas": {"hit_rate@5": -0.1, "mrr": 0.0},
    "p_values": {"hit_rate@5": 0.0004, "mrr": 0.52},
    "ci": {"hit_rate@5": [-0.15, -0.05], "mrr": [-0.02, 0.02]},
    "rank_overlap": 0.93,
    "score_drift": 0.0123,
    "score_drifted_ratio": 0.02,
    "top_score_delta": -0.01,
}


def report(**overrides: Any) -> dict[str, Any]:
    """A passing report without a baseline."""
    base: dict[str, Any] = {
        "run_id": "ab12",
        "target": "docs-search",
        "started_at": "2026-11-22T03:00:00+00:00",
        "duration_s": 1.2,
        "metrics": {"hit_rate@5": 0.8, "mrr": 0.9},
        "counts": {
            "cases": 4,
            "answered": 4,
            "labelled": 4,
            "negative": 0,
            "label_free": 0,
            "outcomes": {"ok": 4, "timeout": 0},
        },
        "cases": [case_entry(f"c{i}", query=f"query {i}") for i in range(4)],
    }
    return run_report(**(base | overrides))


def regressions(n: int) -> list[dict[str, Any]]:
    """``n`` regressed cases c0..c(n-1), worst first."""
    return [
        {"case": f"c{i}", "metric": "hit_rate@5", "baseline": 1.0, "current": 0.0} for i in range(n)
    ]


def test_passing_report_without_baseline_shows_headline_and_plain_metrics() -> None:
    """A pass is headed with a check mark and lists metric values only."""
    lines = render_markdown(report()).splitlines()
    assert lines[0] == "## ✅ pass: ragcanary suite `core` on `docs-search`"
    assert lines[2] == "**Coverage** 100.0% (4/4 answered) · **Duration** 1.2 s · **Run** `ab12`"
    assert "| metric | value |" in lines
    assert "| hit\\_rate@5 | 0.800 |" in lines
    assert "| mrr | 0.900 |" in lines
    text = "\n".join(lines)
    assert "### Failures" not in text
    assert "### Regressed cases" not in text
    assert "### Drift" not in text
    assert "Unanswered" not in text


def test_baseline_adds_deltas_p_values_intervals_and_drift() -> None:
    """With a baseline the table compares, and a drift section follows."""
    lines = render_markdown(report(baseline=BASELINE)).splitlines()
    assert "**Baseline** `base1`" in lines[2]
    assert "| metric | value | Δ vs baseline | p-value | CI of Δ |" in lines
    assert "| hit\\_rate@5 | 0.800 | -0.100 | < 0.001 | [-0.150, -0.050] |" in lines
    assert "| mrr | 0.900 | +0.000 | 0.520 | [-0.020, +0.020] |" in lines
    drift = lines[lines.index("### Drift vs baseline") :]
    assert drift[2:] == [
        "- Rank overlap (RBO): 0.930",
        "- Score drift (mean abs Δ): 0.012",
        "- Drifted (case, id) pairs: 2.0%",
        "- Top-1 score Δ: -0.010",
    ]


def test_a_vector_search_adds_its_embedding_drift_and_a_new_dimension() -> None:
    embedded = {**BASELINE, "embedding_drift": 0.0612, "embedding_changed_ratio": 1.0}
    drift = render_markdown(report(baseline=embedded)).splitlines()[-2:]
    assert drift == ["- Embedding drift (1 - mean cosine): 0.061", "- Query vectors moved: 100.0%"]
    resized = {**embedded, "embedding_dimensions": {"baseline": 384, "current": 768}}
    assert render_markdown(report(baseline=resized)).splitlines()[-1] == (
        "- Embedding dimensions: 384 → 768"
    )


def test_regression_report_lists_failures_and_regressed_cases() -> None:
    """Failures become a list and regressed cases a table, one row per case, worst first."""
    rendered = render_markdown(
        report(
            outcome="regression",
            baseline=BASELINE,
            failures=[
                {
                    "kind": "floor",
                    "metric": "hit_rate@5",
                    "case": None,
                    "message": "hit_rate@5 0.62 is below the floor 0.80",
                },
                {"kind": "negative_leak", "metric": None, "case": "c3", "message": "c3 leaked"},
            ],
            regressions=[
                {"case": "c2", "metric": "hit_rate@5", "baseline": 1.0, "current": 0.0},
                {"case": "c0", "metric": "mrr", "baseline": 1.0, "current": 0.5},
                {"case": "c2", "metric": "mrr", "baseline": 1.0, "current": 0.25},
            ],
        )
    )
    lines = rendered.splitlines()
    assert lines[0] == "## ❌ regression: ragcanary suite `core` on `docs-search`"
    failures = lines.index("### Failures")
    assert lines[failures + 2 : failures + 4] == [
        "- hit\\_rate@5 0.62 is below the floor 0.80",
        "- c3 leaked",
    ]
    table = lines.index("### Regressed cases")
    assert lines[table + 2 : table + 6] == [
        "| case | query | change |",
        "| --- | --- | --- |",
        "| `c2` | `query 2` | hit\\_rate@5 1.000 → 0.000, mrr 1.000 → 0.250 |",
        "| `c0` | `query 0` | mrr 1.000 → 0.500 |",
    ]
    assert "more" not in rendered


@pytest.mark.parametrize(
    ("regressed", "max_cases", "shown", "more"),
    [
        (3, 10, 3, None),
        (10, 10, 10, None),
        (12, 10, 10, "…and 2 more"),
        (5, 2, 2, "…and 3 more"),
        (1, 0, 0, "…and 1 more"),
    ],
)
def test_regressed_cases_are_capped_at_max_cases(
    regressed: int, max_cases: int, shown: int, more: str | None
) -> None:
    """At most max_cases rows, the worst ones, then a count of the rest."""
    lines = render_markdown(
        report(outcome="regression", regressions=regressions(regressed)), max_cases=max_cases
    ).splitlines()
    rows = [line for line in lines if line.startswith("| `c")]
    assert [row.split("`")[1] for row in rows] == [f"c{i}" for i in range(shown)]
    assert (more in lines) if more else not any(line.startswith("…and") for line in lines)


def test_unavailable_report_explains_coverage_and_has_no_metrics() -> None:
    """An outage is a warning with unanswered outcomes, never a table of zeros."""
    rendered = render_markdown(
        report(
            outcome="unavailable",
            coverage=0.25,
            duration_s=75.4,
            metrics={},
            failures=[
                {
                    "kind": "coverage",
                    "metric": None,
                    "case": None,
                    "message": "coverage 0.25 is below min_coverage 0.90",
                }
            ],
            counts={
                "cases": 4,
                "answered": 1,
                "outcomes": {"ok": 1, "timeout": 2, "http_5xx": 1, "empty": 0},
            },
        )
    )
    lines = rendered.splitlines()
    assert lines[0] == "## ⚠️ unavailable: ragcanary suite `core` on `docs-search`"
    assert lines[2].startswith("**Coverage** 25.0% (1/4 answered) · **Duration** 1 min 15 s")
    assert "Unanswered queries: timeout 2, http\\_5xx 1" in lines
    assert "No labelled case was answered, so there are no quality metrics." in lines
    assert "- coverage 0.25 is below min\\_coverage 0.90" in lines
    assert "| metric" not in rendered


@pytest.mark.parametrize(
    ("case_id", "query", "row"),
    [
        ("a|b", "x | y", "| `a\\|b` | `x \\| y` |"),
        ("multi", "line one\nline two\r\nthree", "| `multi` | `line one line two three` |"),
        ("tick`s", "`quoted`", "| ``tick`s`` | `` `quoted` `` |"),
        ("@team", "#123 *bold*", "| `@team` | `#123 *bold*` |"),
    ],
)
def test_table_cells_escape_pipes_newlines_and_backticks(
    case_id: str, query: str, row: str
) -> None:
    """Ids and queries stay on one row of the table and render verbatim."""
    rendered = render_markdown(
        report(
            outcome="regression",
            regressions=[{"case": case_id, "metric": "mrr", "baseline": 1.0, "current": 0.0}],
            cases=[case_entry(case_id, query=query)],
        )
    )
    assert f"{row} mrr 1.000 → 0.000 |" in rendered.splitlines()


def test_metric_names_and_failure_messages_are_escaped() -> None:
    """Markdown in a metric name or message is shown literally, on one line."""
    rendered = render_markdown(
        report(
            metrics={"weird|name\nx": 0.5},
            failures=[{"kind": "floor", "metric": None, "case": None, "message": "a *b*\n<c>"}],
        )
    )
    lines = rendered.splitlines()
    assert "| weird\\|name<br>x | 0.500 |" in lines
    assert "- a \\*b\\* \\<c\\>" in lines


def test_unknown_outcome_and_missing_fields_still_render() -> None:
    """A sparse report renders with placeholders instead of failing."""
    rendered = render_markdown(unmarshal({"outcome": "weird"}))
    dash = "\u2013"
    lines = rendered.splitlines()
    assert lines[0] == f"## ❔ weird: ragcanary suite {dash} on {dash}"
    # Counts left out are not shown as "0/0 answered": the report did not say.
    assert lines[2] == f"**Coverage** {dash} · **Duration** {dash} · **Run** {dash}"


@settings(max_examples=60, deadline=None)
@given(case_id=st.text(max_size=12), query=st.text(max_size=20))
def test_every_regressed_case_is_exactly_one_table_row(case_id: str, query: str) -> None:
    """Whatever an id or query holds, its row has three cells and no line break."""
    rendered = render_markdown(
        report(
            outcome="regression",
            regressions=[{"case": case_id, "metric": "mrr", "baseline": 1.0, "current": 0.0}],
            cases=[case_entry(case_id, query=query)],
        )
    )
    # Markdown ends lines only at \n and \r, unlike str.splitlines.
    lines = rendered.split("\n")
    header = lines.index("| case | query | change |")
    row = lines[header + 2]
    assert row.endswith("| mrr 1.000 → 0.000 |")
    assert lines[header + 3] == ""
    # Unescaped pipes are the cell borders: exactly four of them.
    unescaped = row.replace("\\|", "").count("|")
    assert unescaped == 4


def test_a_drop_at_every_k_is_one_failure_and_one_change_a_case_floors_first() -> None:
    """hit_rate falling at @1, @5 and @10 is one item naming its worst k, after the floor."""
    drops = [
        {"kind": "drop", "metric": f"hit_rate@{k}", "case": None, "amount": amount,
         "message": f"hit_rate@{k} dropped {amount}"}
        for k, amount in ((1, 0.1), (5, 0.3), (10, 0.2))
    ]  # fmt: skip
    floor = {"kind": "floor", "metric": "mrr", "case": None, "amount": 0.1, "message": "mrr low"}
    regressed = [
        {"case": "c1", "metric": f"hit_rate@{k}", "baseline": 1.0, "current": 0.0}
        for k in (10, 5, 1)
    ]
    rendered = render_markdown(
        report(outcome="regression", failures=[*drops, floor], regressions=regressed)
    )
    section = rendered.partition("### Failures\n\n")[2].partition("\n\n")[0]
    assert section.splitlines() == [
        "- mrr low",
        "- hit\\_rate@5 dropped 0.3 (also dropped at @1, @10)",
    ]
    assert "| `c1` | `query 1` | hit\\_rate@1 1.000 → 0.000 (also dropped at @5, @10) |" in rendered
