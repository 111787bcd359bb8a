"""Embedding drift: cosines of each canary's query vector with its baseline's."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from factories import answer, case, run
from hypothesis import given
from hypothesis import strategies as st

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.cases import Suite
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.report_json import marshal_case
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import ABSENT, baseline_run, build_report
from ragcanary.measure.vector_text import decode_vector, encode_vector
from ragcanary.measure.vectors import CHANGED_BELOW, compare_vectors, cosine
from ragcanary.suites.judge import settings_for

CASES = [case(f"c{i}", ["rel"]) for i in range(4)]


def embedded(vectors: list[tuple[float, ...] | None], run_id: str = "run") -> RunResult:
    """A run of CASES, each answered alike and carrying its query vector."""
    done = run([(c, answer(["rel", "other"])) for c in CASES], run_id)
    results = tuple(replace(r, vector=v) for r, v in zip(done.results, vectors, strict=True))
    return replace(done, results=results)


def turned(angle: float) -> tuple[float, float]:
    return (math.cos(angle), math.sin(angle))


finite = st.floats(-1e3, 1e3, allow_nan=False)


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(*[st.tuples(finite, finite)] * n)))
def test_cosine_equals_numpys_within_its_bounds(pairs: tuple[tuple[float, float], ...]) -> None:
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    got = cosine(a, b)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norms == 0.0:
        assert got is None
        return
    assert got is not None
    assert -1.0 <= got <= 1.0
    assert got == pytest.approx(float(np.dot(a, b)) / norms, abs=1e-9)


def test_cosine_of_a_zero_vector_or_of_two_lengths_is_none() -> None:
    assert cosine([0.0, 0.0], [1.0, 0.0]) is None
    assert cosine([1.0, 0.0], [1.0, 0.0, 0.0]) is None


def test_unchanged_vectors_are_no_drift() -> None:
    vectors = [turned(i / 3) for i in range(4)]
    drift = compare_vectors(embedded(list(vectors)), embedded(list(vectors)))
    assert drift is not None
    assert drift.per_case == dict.fromkeys([c.id for c in CASES], 1.0)
    assert drift.drift == 0.0
    assert drift.changed_ratio == 0.0
    assert drift.dimensions is None


def test_drift_is_one_minus_the_mean_cosine_and_changed_counts_the_moved_vectors() -> None:
    baseline = embedded([turned(0.0)] * 4)
    angles = [0.0, math.acos(0.9995), math.acos(0.99), math.pi / 2]  # 1, 0.9995, 0.99, 0
    drift = compare_vectors(embedded([turned(a) for a in angles]), baseline)
    assert drift is not None
    assert list(drift.per_case.values()) == pytest.approx([1.0, 0.9995, 0.99, 0.0], abs=1e-12)
    assert drift.drift == pytest.approx(1 - (1 + 0.9995 + 0.99 + 0) / 4, abs=1e-12)
    assert 0.9995 > CHANGED_BELOW > 0.99
    assert drift.changed_ratio == 0.5  # 0.99 and 0 moved; 0.9995 is rounding


def test_a_new_dimension_is_reported_and_counts_as_unrelated() -> None:
    baseline = embedded([turned(0.0)] * 4)
    drift = compare_vectors(embedded([(1.0, 0.0, 0.0)] * 4), baseline)
    assert drift is not None
    assert drift.dimensions == (2, 3)
    assert set(drift.per_case.values()) == {None}
    assert drift.drift == 1.0
    assert drift.changed_ratio == 1.0


def test_only_cases_embedded_in_both_runs_are_compared() -> None:
    baseline = embedded([turned(0.0), turned(0.0), None, turned(0.0)])
    current = embedded([turned(0.0), None, turned(0.0), turned(math.pi / 2)])
    drift = compare_vectors(current, baseline)
    assert drift is not None
    assert list(drift.per_case) == ["c0", "c3"]
    assert drift.drift == pytest.approx(0.5, abs=1e-12)
    assert compare_vectors(embedded([None] * 4), baseline) is None


def test_evaluate_and_the_report_carry_the_drift_and_each_cases_cosine() -> None:
    settings = settings_for(SuiteConfig(cases="suite.yaml", targets=["search"]))
    baseline = embedded([turned(0.0)] * 4, "base")
    current = embedded([turned(0.0)] * 3 + [turned(math.pi / 3)])
    report = build_report(evaluate(current, settings, baseline))
    assert report.baseline is not None
    assert report.baseline.embedding_drift == pytest.approx(0.125, abs=1e-12)
    assert report.baseline.embedding_changed_ratio == 0.25
    assert report.baseline.embedding_dimensions is None
    assert report.cases[3].embedding_cosine == pytest.approx(0.5, abs=1e-12)
    assert decode_vector(report.cases[3].query_vector) == pytest.approx(
        turned(math.pi / 3), abs=1e-7
    )
    without = build_report(evaluate(embedded([None] * 4), settings, baseline))
    assert without.baseline is not None
    assert without.baseline.embedding_drift is None
    assert without.cases[0].embedding_cosine is ABSENT  # left out of the JSON, not null
    assert without.cases[0].query_vector is None
    written = marshal_case(without.cases[0])
    assert "embedding_cosine" not in written
    assert "query_vector" not in written


def test_a_report_gives_back_its_vectors_but_not_for_an_edited_query() -> None:
    settings = settings_for(SuiteConfig(cases="suite.yaml", targets=["search"]))
    vectors = [(0.25, -0.5, 0.125)] * 4  # float32 values: read back exactly
    report = build_report(evaluate(embedded(list(vectors)), settings))
    suite = Suite(cases=tuple(CASES))
    assert [r.vector for r in baseline_run(report, suite).results] == vectors
    edited = Suite(cases=(replace(CASES[0], query="another wording"), *CASES[1:]))
    assert [r.vector for r in baseline_run(report, edited).results] == [None, *vectors[1:]]


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=64)
)
def test_a_float32_vector_survives_encoding_exactly(values: list[float]) -> None:
    assert decode_vector(encode_vector(values)) == tuple(values)


@pytest.mark.parametrize("text", [None, 3, "", "not base64!", "AAA=", "AAAAAAA="])
def test_anything_but_an_encoded_vector_decodes_to_none(text: object) -> None:
    assert decode_vector(text) is None
