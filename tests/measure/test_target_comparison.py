"""Several targets against one reference: the verdict's p-values, Holm-corrected per metric."""

from __future__ import annotations

from dataclasses import replace

import pytest
from factories import answer, case, run

from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.settings import Settings
from ragcanary.measure.stats import holm
from ragcanary.measure.target_comparison import (
    compare_evaluations,
    latency_quantile,
    worse_metrics,
)
from ragcanary.measure.verdict import Policy

POLICY = Policy(max_drop=0.02, min_rank_overlap=None)
SETTINGS = Settings((1, 3), 5, "linear", 0.05, POLICY, "desc")
CASES = [case(f"c{i}", ["good"], tags=("even" if i % 2 == 0 else "odd",)) for i in range(12)]


def _run(target: str, missed: set[int], noisy: bool = False):
    """Every canary answers ``good`` first but those in ``missed`` (it comes third there).

    ``noisy`` scores differ from the reference's, so no drop counts as deterministic.
    """
    pairs = []
    for i, c in enumerate(CASES):
        ids = ["x", "y", "good"] if i in missed else ["good", "x", "y"]
        scores = [0.9 - 0.1 * r + (0.001 * i if noisy else 0.0) for r in range(3)]
        pairs.append((c, answer(ids, scores)))
    return replace(run(pairs, run_id=f"run-{target}"), target=target)


@pytest.fixture
def evaluations():
    reference = evaluate(_run("ref", set()), SETTINGS)
    ref_run = reference.run
    candidates = [
        evaluate(_run("equal", set()), SETTINGS, ref_run),
        evaluate(_run("slight", {0}, noisy=True), SETTINGS, ref_run),
        evaluate(_run("much", set(range(9)), noisy=True), SETTINGS, ref_run),
    ]
    return reference, candidates


def test_p_values_are_the_verdict_s_and_corrected_by_holm_per_metric(evaluations) -> None:
    reference, candidates = evaluations
    comparison = compare_evaluations(reference, candidates, POLICY)
    assert [t.name for t in comparison.targets] == ["ref", "equal", "slight", "much"]
    shown = comparison.candidates
    for metric in ("mrr", "hit_rate@1"):
        raw = [c.verdict.changes[metric].p_value for c in candidates]
        assert [t.suite.p_values[metric] for t in shown] == raw
        assert [t.suite.p_values_corrected[metric] for t in shown] == holm(raw)


def test_only_the_much_worse_candidate_is_marked_and_worse(evaluations) -> None:
    reference, candidates = evaluations
    comparison = compare_evaluations(reference, candidates, POLICY)
    equal, slight, much = comparison.candidates
    assert equal.suite.significant == ()
    assert equal.worse == ()
    assert slight.suite.significant == ()
    assert slight.worse == ()
    assert "mrr" in much.suite.significant
    assert "mrr" in much.worse
    assert comparison.worse_targets() == ["much"]
    assert much.suite.deltas["hit_rate@1"] == pytest.approx(-9 / 12)


def test_each_tag_is_its_own_family(evaluations) -> None:
    reference, candidates = evaluations
    comparison = compare_evaluations(reference, candidates, POLICY)
    assert comparison.tags == ("even", "odd")
    much = comparison.candidates[-1]
    for tag in comparison.tags:
        raw = [t.tags[tag].p_values["mrr"] for t in comparison.candidates]
        assert [t.tags[tag].p_values_corrected["mrr"] for t in comparison.candidates] == holm(raw)
        assert much.tags[tag].metrics == candidates[-1].scores.by_tag[tag]
    assert comparison.targets[0].tags["even"].metrics == reference.scores.by_tag["even"]


@pytest.mark.parametrize(
    ("drops", "corrected", "candidates", "expected"),
    [
        pytest.param(["mrr"], {"mrr": 0.2}, 1, ("mrr",), id="one-candidate-keeps-the-verdict"),
        pytest.param(["mrr"], {"mrr": 0.2}, 3, (), id="not-significant-after-correction"),
        pytest.param(["mrr", "mrr"], {"mrr": 0.01}, 3, ("mrr",), id="significant"),
        pytest.param([], {"mrr": 0.001}, 3, (), id="significant-but-no-drop-beyond-max-drop"),
    ],
)
def test_worse_metrics(drops, corrected, candidates, expected) -> None:
    assert worse_metrics(drops, corrected, 0.05, candidates) == expected


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param([], 0.5, None, id="none"),
        pytest.param([0.3], 0.95, 0.3, id="one"),
        pytest.param([0.4, 0.1, 0.2, 0.3], 0.5, 0.25, id="median-between"),
        pytest.param([0.1, 0.2, 0.3, 0.4, 0.5], 0.95, 0.48, id="p95"),
    ],
)
def test_latency_quantile_interpolates_like_numpy(values, q, expected) -> None:
    got = latency_quantile(values, q)
    assert got == (None if expected is None else pytest.approx(expected))
