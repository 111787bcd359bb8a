"""Tests of the exact IR measures against hand-worked cases, trec_eval (pytrec_eval) and
ir_measures (Judged@k)."""

from __future__ import annotations

import math

import ir_measures
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.metrics import (
    aggregate,
    aggregate_name,
    case_metrics,
    dedupe,
    is_judged_share,
)

KS = (1, 3, 5, 10)
# Our name -> pytrec_eval's measure family (results come back as "<family>_<k>").
CUT_MEASURES = {
    "hit_rate": "success",
    "precision": "P",
    "recall": "recall",
    "ndcg": "ndcg_cut",
    "ap": "map_cut",
}
CUTS = ",".join(str(k) for k in KS)
TREC_MEASURES = {f"{family}.{CUTS}" for family in CUT_MEASURES.values()} | {
    "recip_rank",
    "bpref",
}
JUDGED = [ir_measures.Judged @ k for k in KS]

DOCS = [f"d{i}" for i in range(12)]
rankings = st.lists(st.sampled_from(DOCS), max_size=16)
qrels = st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), min_size=1).filter(
    lambda judged: any(grade > 0 for grade in judged.values())
)
depths = st.integers(1, 14)


def scored_run(ranking: list[str], depth: int) -> dict[str, float]:
    """Our deduped, depth-cut ranking as a run whose scores fall strictly, so every
    reference's sort (trec_eval's, ir_measures') keeps our order."""
    ranked = dedupe(ranking)[:depth]
    return {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}


def trec_eval(ranking: list[str], relevant: dict[str, int], depth: int) -> dict[str, float]:
    """pytrec_eval's measures of our ranking."""
    evaluator = pytrec_eval.RelevanceEvaluator({"q": relevant}, TREC_MEASURES)
    return evaluator.evaluate({"q": scored_run(ranking, depth)})["q"]


def ir_measures_judged(
    ranking: list[str], relevant: dict[str, int], depth: int
) -> dict[int, float]:
    """ir_measures' own Judged@k of our ranking, by k."""
    values = ir_measures.iter_calc(JUDGED, {"q": relevant}, {"q": scored_run(ranking, depth)})
    return {metric.measure["cutoff"]: metric.value for metric in values}


@settings(max_examples=300, deadline=None)
@given(ranking=rankings, relevant=qrels, depth=depths)
def test_every_measure_equals_trec_eval(ranking, relevant, depth):
    """Every measure at every k, and RR, match pytrec_eval to 1e-9 on deduped, depth-cut runs."""
    ours = case_metrics(ranking, relevant, KS, depth)
    reference = trec_eval(ranking, relevant, depth)
    for name, family in CUT_MEASURES.items():
        for k in KS:
            assert abs(ours[f"{name}@{k}"] - reference[f"{family}_{k}"]) <= 1e-9, (name, k)
    assert abs(ours["rr"] - reference["recip_rank"]) <= 1e-9
    assert abs(ours["bpref"] - reference["bpref"]) <= 1e-9


# Many judged non-relevant ids against few relevant ones, and the other way round, so that
# both of bpref's caps (min(n, R) and min(N, R)) bind.
many_judged = st.dictionaries(st.sampled_from(DOCS), st.sampled_from([0, 0, 0, 1, 2])).filter(
    lambda judged: any(grade > 0 for grade in judged.values())
)


@settings(max_examples=500, deadline=None)
@given(ranking=rankings, relevant=st.one_of(qrels, many_judged), depth=depths)
def test_bpref_equals_trec_eval(ranking, relevant, depth):
    """bpref matches pytrec_eval's to 1e-9, judged non-relevant ids, grades and caps included."""
    ours = case_metrics(ranking, relevant, KS, depth)["bpref"]
    assert abs(ours - trec_eval(ranking, relevant, depth)["bpref"]) <= 1e-9


@settings(max_examples=500, deadline=None)
@given(ranking=rankings, relevant=st.one_of(qrels, many_judged), depth=depths)
def test_judged_equals_ir_measures(ranking, relevant, depth):
    """Judged@k matches ir_measures' Judged@k, ids judged 0 and rankings shorter than k included."""
    ours = case_metrics(ranking, relevant, KS, depth)
    if not dedupe(ranking):
        # ir_measures divides by the ranking's length and fails on an empty one.
        assert all(ours[f"judged@{k}"] == 0.0 for k in KS)
        return
    reference = ir_measures_judged(ranking, relevant, depth)
    for k in KS:
        assert abs(ours[f"judged@{k}"] - reference[k]) <= 1e-9, k


@settings(max_examples=200, deadline=None)
@given(ranking=rankings, relevant=qrels, depth=depths)
def test_exponential_ndcg_equals_trec_eval_on_exponential_grades(ranking, relevant, depth):
    """Exponential gain 2^g - 1 equals trec_eval's linear ndcg_cut on qrels graded 2^g - 1."""
    ours = case_metrics(ranking, relevant, KS, depth, gain="exponential")
    reference = trec_eval(ranking, {doc: 2**g - 1 for doc, g in relevant.items()}, depth)
    for k in KS:
        assert abs(ours[f"ndcg@{k}"] - reference[f"ndcg_cut_{k}"]) <= 1e-9, k


@settings(max_examples=200, deadline=None)
@given(ranking=rankings, relevant=qrels, depth=depths)
def test_measures_lie_in_unit_interval_and_grow_with_k(ranking, relevant, depth):
    """Every measure is within [0, 1]; hit rate and recall never fall as k grows."""
    ours = case_metrics(ranking, relevant, KS, depth)
    assert all(0.0 <= value <= 1.0 + 1e-12 for value in ours.values())
    for name in ("hit_rate", "recall", "ap"):
        values = [ours[f"{name}@{k}"] for k in KS]
        assert values == sorted(values), name


@pytest.mark.parametrize(
    ("ranking", "relevant", "depth", "expected"),
    [
        pytest.param(["a"], {"a": 1}, 10, {"precision@5": 1 / 5}, id="precision-divides-by-k"),
        pytest.param(["x", "x", "a"], {"a": 1}, 10, {"rr": 1 / 2}, id="duplicate-keeps-first"),
        pytest.param(["x", "y", "a"], {"a": 1}, 2, {"rr": 0.0, "hit_rate@3": 0.0}, id="depth-cut"),
        pytest.param(
            ["x", "x", "x", "a", "a"],
            {"a": 1},
            2,
            {"rr": 1 / 2, "precision@3": 1 / 3},
            id="duplicates-take-up-no-depth",
        ),
        pytest.param(["x", "a"], {"a": 1}, 10, {"rr": 1 / 2, "hit_rate@1": 0.0}, id="rr-second"),
        pytest.param(["a", "b"], {"a": 0, "b": 2}, 10, {"hit_rate@1": 0.0}, id="grade-0-miss"),
        pytest.param(
            ["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 10, {"ap@3": (1 + 2 / 3) / 3}, id="ap"
        ),
        pytest.param(
            ["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 10, {"recall@3": 2 / 3}, id="recall"
        ),
        pytest.param(
            ["a"], {"a": 1, "b": 1}, 10, {"ndcg@5": 1 / (1 + 1 / math.log2(3))}, id="ideal-all"
        ),
        pytest.param(
            ["b", "a"],
            {"a": 2, "b": 1},
            10,
            {"ndcg@1": 1 / 2, "ndcg@3": (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))},
            id="graded-linear",
        ),
        pytest.param(
            [],
            {"a": 1, "z": 0},
            10,
            {
                "rr": 0.0,
                "hit_rate@1": 0.0,
                "precision@10": 0.0,
                "ndcg@10": 0.0,
                "ap@10": 0.0,
                "judged@10": 0.0,
                "bpref": 0.0,
            },
            id="empty-ranking",
        ),
        pytest.param(
            ["a", "z", "x", "y"],
            {"a": 1, "z": 0},
            10,
            {"judged@1": 1.0, "judged@3": 2 / 3, "judged@10": 2 / 4},
            id="judged-counts-grade-0-and-divides-by-what-came-back",
        ),
        pytest.param(
            ["x", "y", "x", "a"],
            {"a": 1},
            2,
            {"judged@1": 0.0, "judged@3": 0.0, "judged@10": 0.0, "bpref": 0.0},
            id="judged-after-depth-counts-nothing",
        ),
        pytest.param(
            ["x", "y", "z"],
            {"a": 1, "b": 0},
            10,
            {"judged@1": 0.0, "judged@10": 0.0, "bpref": 0.0, "recall@10": 0.0},
            id="all-unjudged",
        ),
        pytest.param(
            ["a", "a", "b", "b"],
            {"a": 1, "b": 1},
            10,
            {"judged@3": 1.0, "judged@10": 1.0, "bpref": 1.0},
            id="duplicates-judged-once",
        ),
        pytest.param(
            ["x", "a", "y", "b"],
            {"a": 1, "b": 2},
            10,
            {"bpref": 1.0, "judged@10": 2 / 4},
            id="bpref-skips-unjudged",
        ),
        pytest.param(
            ["n1", "a", "n2", "n3", "b"],
            {"a": 1, "b": 1, "c": 1, "n1": 0, "n2": 0, "n3": 0},
            10,
            {"bpref": ((1 - 1 / 3) + (1 - 3 / 3)) / 3},
            id="bpref-non-relevant-above",
        ),
        pytest.param(
            ["n1", "n2", "a", "b"],
            {"a": 1, "b": 1, "n1": 0, "n2": 0, "n3": 0, "n4": 0},
            10,
            {"bpref": 0.0},
            id="bpref-caps-non-relevant-at-r",
        ),
        pytest.param(
            ["n1", "a"],
            {"a": 1, "b": 1, "c": 1, "n1": 0},
            10,
            {"bpref": (1 - 1 / 1) / 3},
            id="bpref-divides-by-min-of-n-and-r",
        ),
    ],
)
def test_hand_computed_examples(ranking, relevant, depth, expected):
    """Small cases worked out by hand give exactly the expected values."""
    ours = case_metrics(ranking, relevant, KS, depth)
    for name, value in expected.items():
        assert ours[name] == pytest.approx(value, abs=1e-12), name


def test_precision_divides_by_k_even_when_fewer_results():
    """One relevant result of one returned is P@10 = 0.1, as trec_eval's P_10."""
    assert case_metrics(["a"], {"a": 1}, [10], 10)["precision@10"] == pytest.approx(0.1)


def test_ndcg_uses_all_judged_docs_for_ideal_dcg():
    """A perfect top-1 still loses NDCG when other judged relevant ids were never retrieved."""
    alone = case_metrics(["a"], {"a": 1}, [3], 10)["ndcg@3"]
    with_missing = case_metrics(["a"], {"a": 1, "b": 1}, [3], 10)["ndcg@3"]
    assert alone == 1.0
    assert with_missing < 1.0


def test_exponential_gain_rewards_high_grades_more():
    """With exponential gain, 2^g - 1 replaces g as the gain of a grade."""
    ours = case_metrics(["b", "a"], {"a": 3, "b": 1}, [2], 10, gain="exponential")
    expected = (1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3))
    assert ours["ndcg@2"] == pytest.approx(expected, abs=1e-12)


def test_ranking_order_is_kept_not_sorted():
    """Ids are measured in the order given, so a relevant id last stays last."""
    ours = case_metrics(["z", "y", "a"], {"a": 1}, [1], 10)
    assert ours["rr"] == pytest.approx(1 / 3)


def test_keys_cover_every_metric_and_k():
    """The result has the six cut-off measures for every k, then rr and bpref."""
    ours = case_metrics(["a"], {"a": 1}, [1, 5], 10)
    assert list(ours) == [
        "hit_rate@1",
        "hit_rate@5",
        "precision@1",
        "precision@5",
        "recall@1",
        "recall@5",
        "ndcg@1",
        "ndcg@5",
        "ap@1",
        "ap@5",
        "judged@1",
        "judged@5",
        "rr",
        "bpref",
    ]


@pytest.mark.parametrize(
    ("relevant", "ks", "depth", "message"),
    [
        pytest.param({}, [1], 10, "no grade above 0", id="no-judgements"),
        pytest.param({"a": 0}, [1], 10, "no grade above 0", id="only-grade-0"),
        pytest.param({"a": 1}, [0], 10, "every k must be at least 1", id="k-0"),
        pytest.param({"a": 1}, [1], 0, "depth must be at least 1", id="depth-0"),
    ],
)
def test_case_metrics_rejects_unmeasurable_input(relevant, ks, depth, message):
    """Cases without a relevant id, and cut-offs below 1, raise ValueError."""
    with pytest.raises(ValueError, match=message):
        case_metrics(["a"], relevant, ks, depth)


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([], []),
        (["a", "b", "a", "c", "b"], ["a", "b", "c"]),
        (["a", "a", "a"], ["a"]),
    ],
)
def test_dedupe_keeps_first_position(ids, expected):
    """Later duplicates are dropped and the list compacts."""
    assert dedupe(ids) == expected


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("judged@10", True), ("judged@1", True), ("bpref", False), ("hit_rate@5", False)],
)
def test_only_judged_at_k_measures_the_labels(metric, expected):
    """Judged@k is told apart from the quality measures, bpref being one of those."""
    assert is_judged_share(metric) is expected


@pytest.mark.parametrize(
    ("case_metric", "expected"),
    [
        ("rr", "mrr"),
        ("ap@5", "map@5"),
        ("ndcg@10", "ndcg@10"),
        ("hit_rate@1", "hit_rate@1"),
        ("rrx", "rrx"),
    ],
)
def test_aggregate_name_renames_rr_and_ap(case_metric, expected):
    """The means of RR and AP are called MRR and MAP; other names stay."""
    assert aggregate_name(case_metric) == expected


def test_aggregate_is_weighted_mean_under_aggregate_names():
    """Weights scale each case's say; rr and ap@k come back as mrr and map@k."""
    result = aggregate(
        [
            ({"hit_rate@1": 1.0, "rr": 1.0, "ap@3": 0.5}, 3.0),
            ({"hit_rate@1": 0.0, "rr": 0.5, "ap@3": 0.0}, 1.0),
        ]
    )
    assert result == pytest.approx({"hit_rate@1": 0.75, "mrr": 0.875, "map@3": 0.375})


def test_aggregate_keeps_only_keys_present_in_every_case():
    """A metric missing from one case is not averaged over the others."""
    result = aggregate([({"a": 1.0, "b": 1.0}, 1.0), ({"a": 0.0}, 1.0)])
    assert result == {"a": 0.5}


@pytest.mark.parametrize(
    "per_case",
    [
        pytest.param([], id="empty"),
        pytest.param([({"a": 1.0}, 0.0), ({"a": 0.0}, 0.0)], id="zero-weights"),
    ],
)
def test_aggregate_of_nothing_is_empty(per_case):
    """No cases, or no weight at all, leave nothing to average."""
    assert aggregate(per_case) == {}


def test_aggregate_rejects_negative_weight():
    """A negative weight has no meaning as a case's say in a mean."""
    with pytest.raises(ValueError, match="negative"):
        aggregate([({"a": 1.0}, -1.0)])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1.0),
            st.floats(0.0, 10.0).filter(lambda w: w == 0 or w > 1e-3),
        ),
        min_size=1,
        max_size=20,
    ).filter(lambda pairs: sum(w for _, w in pairs) > 0)
)
def test_aggregate_lies_between_smallest_and_largest_weighted_value(pairs):
    """A weighted mean never leaves the range of the values that carry weight."""
    result = aggregate([({"rr": v}, w) for v, w in pairs])["mrr"]
    weighted = [v for v, w in pairs if w > 0]
    assert min(weighted) - 1e-12 <= result <= max(weighted) + 1e-12
