"""Tests of ranked-list comparison: RBO_ext, Jaccard@k and the per-case list diff."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.measure.comparison import (
    Entry,
    ListComparison,
    Move,
    align_ties,
    compare_lists,
    jaccard,
    rbo,
)
from ragcanary.measure.metrics import dedupe

ids = st.lists(st.sampled_from([f"d{i}" for i in range(15)]), max_size=20)
persistence = st.floats(0.05, 0.95)


def rbo_by_definition(a: list[str], b: list[str], p: float) -> float:
    """RBO as the infinite sum (1 - p) sum_d p^(d-1) A_d, truncated where p^d is negligible.

    Agreement A_d comes from set intersections of the prefixes; past the shorter
    list's length s its unseen items agree at X_s / s, and past the longer list's
    length the agreement at that depth continues, as Webber et al. extrapolate.
    """
    short, long = sorted((dedupe(a), dedupe(b)), key=len)
    s, n = len(short), len(long)
    x_s = len(set(short) & set(long[:s]))

    def agreement(d: int) -> float:
        d = min(d, n)
        seen = len(set(short[:d]) & set(long[:d]))
        return (seen + (x_s * (d - s) / s if d > s else 0.0)) / d

    depth = n + int(math.log(1e-18) / math.log(p)) + 1
    return (1 - p) * sum(p ** (d - 1) * agreement(d) for d in range(1, depth + 1))


@pytest.mark.parametrize(
    ("a", "b", "p", "expected"),
    [
        pytest.param(
            ["1", "2", "3", "4", "5"],
            ["2", "3", "4", "1", "5"],
            0.9,
            (0.1 / 0.9) * (0.5 * 0.9**2 + 2 / 3 * 0.9**3 + 0.9**4 + 0.9**5) + 0.9**5,
            id="even-0.828",
        ),
        pytest.param(["a", "b"], ["b", "a"], 0.5, 0.5, id="swapped-pair"),
        pytest.param(["a", "b"], ["b", "c", "d"], 0.5, 0.25, id="uneven-one-shared"),
        pytest.param(["a", "b", "c"], ["d", "a"], 0.5, 0.25, id="uneven-late-match"),
        pytest.param(["a", "c"], ["a", "b", "c"], 0.5, 5 / 6, id="uneven-shorter-inside-longer"),
        pytest.param(["a"], ["a", "b"], 0.9, 1.0, id="prefix-extrapolates-to-full-agreement"),
        pytest.param(["a", "a", "b"], ["a", "b"], 0.9, 1.0, id="duplicates-dropped"),
        pytest.param(["a"], ["b"], 0.9, 0.0, id="disjoint"),
        pytest.param([], [], 0.9, 1.0, id="both-empty"),
        pytest.param(["a"], [], 0.9, 0.0, id="one-empty"),
    ],
)
def test_rbo_matches_hand_worked_examples(a, b, p, expected):
    """Small cases worked out by hand from eq. 32 of Webber, Moffat & Zobel (2010)."""
    assert rbo(a, b, p) == pytest.approx(expected, abs=1e-12)
    assert rbo(b, a, p) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(a=ids.filter(bool), b=ids.filter(bool), p=persistence)
def test_rbo_equals_its_extrapolated_infinite_sum(a, b, p):
    """The closed form agrees with the truncated infinite sum over extrapolated agreements."""
    assert rbo(a, b, p) == pytest.approx(rbo_by_definition(a, b, p), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(a=ids, b=ids, p=persistence)
def test_rbo_is_symmetric_and_within_unit_interval(a, b, p):
    """Swapping the lists changes nothing, and the value is always in [0, 1]."""
    value = rbo(a, b, p)
    assert 0.0 <= value <= 1.0
    assert value == rbo(b, a, p)


@settings(max_examples=100, deadline=None)
@given(a=st.lists(st.text(min_size=1, max_size=3), max_size=60), p=persistence)
def test_rbo_of_identical_lists_is_exactly_one(a, p):
    """No rounding error: a list against itself scores exactly 1.0."""
    assert rbo(a, list(a), p) == 1.0


@settings(max_examples=100, deadline=None)
@given(a=ids.filter(bool), b=ids.filter(bool), p=persistence)
def test_rbo_of_disjoint_lists_is_zero(a, b, p):
    """Lists sharing no id score 0.0."""
    other = [f"x{doc}" for doc in b]
    assert rbo(a, other, p) == 0.0


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5])
def test_rbo_rejects_persistence_outside_open_unit_interval(p):
    """p must be strictly between 0 and 1 for the geometric weights to make sense."""
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        rbo(["a"], ["b"], p)


@pytest.mark.parametrize(
    ("a", "b", "k", "expected"),
    [
        pytest.param(["a", "b", "c"], ["b", "a", "c"], 3, 1.0, id="same-set"),
        pytest.param(["a", "b", "c"], ["a", "d", "e"], 3, 1 / 5, id="one-of-five"),
        pytest.param(["a", "b", "x"], ["b", "a", "y"], 2, 1.0, id="cut-to-k"),
        pytest.param(["a", "a", "b"], ["a", "b"], 2, 1.0, id="dedupe-before-cut"),
        pytest.param([], [], 5, 1.0, id="both-empty"),
        pytest.param(["a"], [], 5, 0.0, id="one-empty"),
    ],
)
def test_jaccard_compares_top_k_sets(a, b, k, expected):
    """Jaccard is |A and B| / |A or B| over the deduplicated top-k sets."""
    assert jaccard(a, b, k) == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(a=ids, b=ids, k=st.integers(1, 12))
def test_jaccard_is_symmetric_within_unit_interval_and_one_on_itself(a, b, k):
    """Jaccard is symmetric, in [0, 1], and 1.0 for a list against itself."""
    value = jaccard(a, b, k)
    assert 0.0 <= value <= 1.0
    assert value == jaccard(b, a, k)
    assert jaccard(a, a, k) == 1.0


def test_jaccard_rejects_k_below_one():
    """A top-0 set compares nothing."""
    with pytest.raises(ValueError, match="at least 1"):
        jaccard(["a"], ["a"], 0)


def test_compare_lists_reports_entered_left_moves_and_score_deltas():
    """A worked diff: one id entered, one left, two swapped, scores moved."""
    result = compare_lists(
        ["a", "b", "c", "d"],
        [0.9, 0.8, 0.7, 0.6],
        ["b", "a", "e", "c", "b"],
        [0.95, 0.85, 0.5, 0.4, 0.1],
        k=3,
    )
    assert result.entered == (Entry("e", 3, 0.5),)
    assert result.left == (Entry("c", 3, 0.7),)
    assert result.moves == (Move("b", 2, 1), Move("a", 1, 2))
    assert list(result.score_deltas) == ["b", "a", "c"]
    assert result.score_deltas == pytest.approx({"b": 0.15, "a": -0.05, "c": -0.3})
    assert result.top1_delta == pytest.approx(0.05)
    assert result.jaccard == pytest.approx(2 / 4)
    assert result.rbo == rbo(["a", "b", "c", "d"], ["b", "a", "e", "c"])


def test_compare_lists_puts_largest_move_first():
    """Moves are ordered by distance, then by current rank."""
    result = compare_lists(
        ["a", "b", "c", "d", "e"], [None] * 5, ["e", "c", "b", "d", "a"], [None] * 5, k=5
    )
    assert result.moves == (Move("e", 5, 1), Move("a", 1, 5), Move("c", 3, 2), Move("b", 2, 3))


@pytest.mark.parametrize(
    ("before_scores", "after_scores"),
    [
        pytest.param([None, 0.5], [0.9, 0.5], id="baseline-missing"),
        pytest.param([0.9, 0.5], [None, 0.5], id="current-missing"),
        pytest.param([0.9, 0.5], [math.nan, 0.5], id="current-nan"),
        pytest.param([math.inf, 0.5], [0.9, 0.5], id="baseline-inf"),
    ],
)
def test_compare_lists_skips_missing_scores(before_scores, after_scores):
    """An id whose score is None or not finite on either side gets no delta."""
    result = compare_lists(["a", "b"], before_scores, ["a", "b"], after_scores, k=2)
    assert result.top1_delta is None
    assert result.score_deltas == {"b": 0.0}


def test_compare_lists_of_empty_lists_is_identical_with_no_top1():
    """Two empty answers agree fully and have no top-1 score to compare."""
    assert compare_lists([], [], [], [], k=5) == ListComparison(
        rbo=1.0, jaccard=1.0, entered=(), left=(), moves=(), score_deltas={}, top1_delta=None
    )


def test_compare_lists_keeps_score_at_first_position_of_a_duplicate():
    """A repeated id keeps its first rank and score; the repeat is ignored."""
    result = compare_lists(["a"], [0.5], ["x", "a", "a"], [0.9, 0.7, 0.1], k=1)
    assert result.score_deltas == pytest.approx({"a": 0.2})
    assert result.entered == (Entry("x", 1, 0.9),)
    assert result.left == (Entry("a", 1, 0.5),)


@pytest.mark.parametrize(
    ("before_ids", "before_scores", "k", "message"),
    [
        pytest.param(["a", "b"], [0.5], 3, "2 ids but 1 scores", id="length-mismatch"),
        pytest.param(["a"], [0.5], 0, "k must be at least 1", id="k-0"),
    ],
)
def test_compare_lists_rejects_malformed_input(before_ids, before_scores, k, message):
    """Ids and scores must pair up, and k must be at least 1."""
    with pytest.raises(ValueError, match=message):
        compare_lists(before_ids, before_scores, ["a"], [0.5], k=k)


@settings(max_examples=200, deadline=None)
@given(before=ids, after=ids, k=st.integers(1, 12))
def test_compare_lists_parts_agree_with_each_other(before, after, k):
    """Entered, left and moves partition the top-k union consistently with Jaccard."""
    result = compare_lists(before, [1.0] * len(before), after, [2.0] * len(after), k=k)
    top_before, top_after = dedupe(before)[:k], dedupe(after)[:k]
    common = len(top_after) - len(result.entered)
    assert common == len(top_before) - len(result.left)
    union = common + len(result.entered) + len(result.left)
    assert result.jaccard == (common / union if union else 1.0)
    assert all(m.before != m.after and 1 <= m.after <= k for m in result.moves)
    distances = [abs(m.after - m.before) for m in result.moves]
    assert distances == sorted(distances, reverse=True)
    assert set(result.score_deltas) == set(before) & set(after)
    assert all(delta == 1.0 for delta in result.score_deltas.values())


scores = st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-3, 3))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), listed=ids, k=st.integers(1, 12), p=persistence)
def test_compare_lists_of_an_unchanged_answer(data, listed, k, p):
    """An answer equal to its baseline: full overlap, nothing moved, every usable delta 0.

    The deltas keep their type (an int score's delta is the int 0), and a NaN or infinite
    score is unusable however the two lists hold it.
    """
    values = data.draw(st.lists(scores, min_size=len(listed), max_size=len(listed)))
    result = compare_lists(listed, values, list(listed), list(values), k=k, p=p)
    first = {}
    for doc, score in zip(listed, values, strict=True):
        first.setdefault(doc, score)
    usable = {d: s for d, s in first.items() if s is not None and math.isfinite(s)}
    assert (result.rbo, result.jaccard) == (1.0, 1.0)
    assert (result.entered, result.left, result.moves) == ((), (), ())
    assert result.score_deltas == {d: s - s for d, s in usable.items()}
    assert [type(v) for v in result.score_deltas.values()] == [type(s) for s in usable.values()]
    top = next(iter(first), None)
    assert result.top1_delta == (usable[top] - usable[top] if top in usable else None)


def test_an_unchanged_answer_with_unpaired_scores_is_refused_like_any_other():
    with pytest.raises(ValueError, match=r"^before: 2 ids but 1 scores$"):
        compare_lists(["a", "b"], [0.5], ["a", "b"], [0.5], k=2)
    with pytest.raises(ValueError, match="ids: 2 ids but 1 scores"):
        align_ties(["a", "b"], [0.5], ["a", "b"], [0.5, 0.4], 0.1)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(), listed=ids, tolerance=st.floats(0, 0.5), order=st.sampled_from(["desc", "asc"])
)
def test_align_ties_leaves_the_baselines_own_order_alone(data, listed, tolerance, order):
    """Ids in the baseline's order come back as they are (deduplicated), whatever the scores."""
    n = len(listed)
    now = data.draw(st.lists(st.none() | st.floats(0, 1), min_size=n, max_size=n))
    then = data.draw(st.lists(st.none() | st.floats(0, 1), min_size=n, max_size=n))
    assert align_ties(listed, now, list(listed), then, tolerance, order) == tuple(dedupe(listed))


BASE_IDS = ["a", "b", "c", "d"]
BASE_SCORES = [0.80, 0.79, 0.60, 0.59]


@pytest.mark.parametrize(
    ("ids", "scores", "tolerance", "expected"),
    [
        # a and b swapped within the tolerance: the baseline's order comes back.
        (["b", "a", "c", "d"], [0.80, 0.79, 0.60, 0.59], 0.02, ("a", "b", "c", "d")),
        # The same swap with a gap wider than the tolerance is a real reordering.
        (["b", "a", "c", "d"], [0.85, 0.79, 0.60, 0.59], 0.02, ("b", "a", "c", "d")),
        # Exact ties are always put in the baseline's order, even with no tolerance.
        (["b", "a", "d", "c"], [0.8, 0.8, 0.6, 0.6], 0.0, ("a", "b", "c", "d")),
        # A chain of near-ties is one group; an id the baseline lacks goes to its end.
        (["x", "b", "a", "c"], [0.81, 0.80, 0.79, 0.40], 0.02, ("a", "b", "x", "c")),
        # Scores out of order (a reranker's doing) are never treated as ties.
        (["b", "a", "c", "d"], [0.79, 0.80, 0.60, 0.59], 0.02, ("b", "a", "c", "d")),
        # The last result traded for one just past the baseline's end gives its place back.
        (["a", "b", "c", "e"], [0.80, 0.79, 0.60, 0.58], 0.02, ("a", "b", "c", "d")),
        # ... but not when the missing id scored far higher: it left the list for real.
        (["a", "b", "c", "e"], [0.80, 0.79, 0.60, 0.30], 0.02, ("a", "b", "c", "e")),
        # Missing scores tie with nothing.
        (["b", "a", "c", "d"], [None, 0.79, 0.60, 0.59], 0.05, ("b", "a", "c", "d")),
    ],
)
def test_align_ties_undoes_only_what_score_noise_explains(ids, scores, tolerance, expected):
    assert align_ties(ids, scores, BASE_IDS, BASE_SCORES, tolerance) == expected


@pytest.mark.parametrize(
    ("ids", "scores", "tolerance", "expected"),
    [
        (["b", "a", "c", "d"], [0.80, 0.79, 0.60, 0.59], 0.02, ("a", "b", "c", "d")),
        (["b", "a", "c", "d"], [0.85, 0.79, 0.60, 0.59], 0.02, ("b", "a", "c", "d")),
        (["b", "a", "c", "d"], [0.79, 0.80, 0.60, 0.59], 0.02, ("b", "a", "c", "d")),
        (["a", "b", "c", "e"], [0.80, 0.79, 0.60, 0.58], 0.02, ("a", "b", "c", "d")),
        (["a", "b", "c", "e"], [0.80, 0.79, 0.60, 0.30], 0.02, ("a", "b", "c", "e")),
    ],
)
def test_align_ties_reads_distances_the_other_way_round(ids, scores, tolerance, expected):
    """The same lists as distances (1 - similarity, lower is better) align the same way."""
    distances = [None if s is None else 1 - s for s in scores]
    base = [1 - s for s in BASE_SCORES]
    assert align_ties(ids, distances, BASE_IDS, base, tolerance, order="asc") == expected


def test_align_ties_keeps_a_lost_relevant_document_out_of_its_old_rank():
    """A document gone from the index may come back only at the end, never at its old rank."""
    aligned = align_ties(["b", "c", "d", "e"], [0.79, 0.60, 0.59, 0.58], BASE_IDS, BASE_SCORES, 0.3)
    assert aligned[0] != "a"
    assert set(aligned) <= {*BASE_IDS, "e"}


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from("abcdefgh"), max_size=8),
    st.lists(st.floats(0, 1), min_size=8, max_size=8),
    st.floats(0, 0.2),
)
def test_align_ties_returns_a_deduplicated_list_of_the_same_length(ids, scores, tolerance):
    aligned = align_ties(ids, scores[: len(ids)], BASE_IDS, BASE_SCORES, tolerance)
    assert len(aligned) == len(dedupe(ids))
    assert len(set(aligned)) == len(aligned)
    assert set(aligned) <= set(ids) | set(BASE_IDS)
