"""The report's indented JSON is json.dumps(indent=2)'s text exactly, and its errors too."""

from __future__ import annotations

import datetime
import enum
import json
import math
from typing import Any

import pytest
from factories import answer, case, run
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import build_report
from ragcanary.reports.indented import dumps_indented
from ragcanary.reports.report import dump_text
from ragcanary.suites.judge import settings_for


def expected(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


class Grade(enum.IntEnum):
    GOOD = 2


class Tag(enum.StrEnum):
    FAQ = "faq"


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN, the infinities, -0.0 and subnormals included
    | st.text()  # control characters, quotes, backslashes, U+2028 and astral ones included
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=200)
@given(values)
def test_any_json_value_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert dumps_indented(value) == expected(value)


def test_a_report_with_a_baseline_failures_and_regressions_is_written_exactly() -> None:
    cases = [case(f"c{i}", ["rel", f"r{i}"], tags=("faq", "é✓")) for i in range(6)]
    baseline = run([(c, answer(["rel", "other", c.id])) for c in cases], "base")
    now = [answer(["other", "rel"]), answer([]), answer([], outcome="timeout")]
    current = run(list(zip(cases, now + [answer(["rel"])] * 3, strict=True)))
    settings_ = settings_for(SuiteConfig(cases="suite.yaml", targets=["search"], k=[1, 3]))
    report = build_report(evaluate(current, settings_, baseline))
    first = report.cases[0].vs_baseline
    assert first is not None
    assert first.left  # the nesting a report really has
    data = marshal(report)
    assert dumps_indented(data) == expected(data)
    assert dump_text([report]) == expected(data) + "\n"
    both = [report, build_report(evaluate(baseline, settings_))]
    assert dump_text(both) == expected([marshal(r) for r in both]) + "\n"


@pytest.mark.parametrize(
    "value",
    [
        {"nested": {1: "int key", 2.5: "float key", None: "null key", False: "bool key"}},
        {"flat": {1: 1, 2.5: 2}},
        {"grade": Grade.GOOD, "tag": Tag.FAQ, "in a list": [Grade.GOOD, Tag.FAQ]},
        [{"deep": [[[[]]], {}, [{}], [[1, [2.0, {"x": -0.0}]]]]}],
        [math.inf, -math.inf, math.nan, 1e300, 5e-324, 2**70, '\u2028\x00"\\'],
    ],
)
def test_keys_and_values_json_converts_are_written_as_it_writes_them(value: Any) -> None:
    assert dumps_indented(value) == expected(value)


@pytest.mark.parametrize(
    "value",
    [
        {"cases": [{"when": datetime.date(2026, 11, 26)}]},
        {"tags": {"a", "b"}},
        {"ok": [1, 2], "key": {(1, 2): "tuple key"}},
    ],
)
def test_what_json_refuses_fails_with_its_own_error(value: Any) -> None:
    with pytest.raises(TypeError) as theirs:
        expected(value)
    with pytest.raises(TypeError) as ours:
        dumps_indented(value)
    assert str(ours.value) == str(theirs.value)


def test_a_circular_value_fails_as_json_fails() -> None:
    looped: dict[str, Any] = {"cases": []}
    looped["cases"].append(looped)
    with pytest.raises(ValueError, match="Circular reference detected"):
        dumps_indented(looped)
