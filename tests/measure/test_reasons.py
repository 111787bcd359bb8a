"""The verdict's reasons as people read them: floors first, a line a metric family, canaries."""

from __future__ import annotations

import pytest

from ragcanary.measure.reasons import FamilyDrop, family_drops, reasons, unjudged_note
from ragcanary.measure.verdict import Failure, Regression


def drop(metric: str, amount: float | None) -> Failure:
    return Failure("drop", f"{metric} dropped {amount}", metric, amount=amount)


def floor(metric: str, amount: float | None) -> Failure:
    return Failure("floor", f"{metric} below its floor by {amount}", metric, amount=amount)


LEAK = Failure("negative_leak", "negative canary n1: x scored 0.9", case="n1")
LOW = Failure("min_score", "canary c2: top score is 0.4, below min_score 0.5", case="c2")
OVERLAP = Failure("rank_overlap", "rank overlap 0.6 is below 0.7", amount=0.1)


@pytest.mark.parametrize(
    ("failures", "lines"),
    [
        # The demo's shape: floor and canary last in the verdict's order, read first and last.
        (
            [
                floor("hit_rate@5", 0.01),
                *(
                    drop(f"hit_rate@{k}", a)
                    for k, a in ((1, 0.16), (3, 0.2), (5, 0.23), (10, 0.24))
                ),
                *(drop(f"ndcg@{k}", a) for k, a in ((1, 0.14), (3, 0.14), (5, 0.15), (10, 0.16))),
                drop("mrr", 0.19),
                LOW,
                OVERLAP,
            ],
            [
                "hit_rate@5 below its floor by 0.01",
                "hit_rate@10 dropped 0.24 (also dropped at @1, @3, @5)",
                "ndcg@10 dropped 0.16 (also dropped at @1, @3, @5)",
                "mrr dropped 0.19",
                "rank overlap 0.6 is below 0.7",
                "canary c2: top score is 0.4, below min_score 0.5",
            ],
        ),
        # Floors after drops in the input still come first; floors of a family group too.
        (
            [drop("recall@3", 0.1), floor("hit_rate@1", 0.05), floor("hit_rate@5", 0.1)],
            [
                "hit_rate@5 below its floor by 0.1 (also below its floor at @1)",
                "recall@3 dropped 0.1",
            ],
        ),
        # Equal drops: the first (the smallest k, in the verdict's order) is the worst.
        (
            [drop("hit_rate@1", 0.4), drop("hit_rate@3", 0.4), drop("hit_rate@5", 0.4)],
            ["hit_rate@1 dropped 0.4 (also dropped at @3, @5)"],
        ),
        # Canaries keep their order, after everything else.
        ([LEAK, drop("mrr", 0.3), LOW], ["mrr dropped 0.3", LEAK.message, LOW.message]),
        # A report written before amounts were recorded cannot tell the worst: nothing merged.
        (
            [drop("hit_rate@1", None), drop("hit_rate@3", None)],
            ["hit_rate@1 dropped None", "hit_rate@3 dropped None"],
        ),
        (
            [Failure("coverage", "coverage 10% is below min_coverage 90%")],
            ["coverage 10% is below min_coverage 90%"],
        ),
        ([], []),
    ],
)
def test_reasons_are_floors_then_one_line_a_family_then_the_rest_then_canaries(
    failures: list[Failure], lines: list[str]
) -> None:
    assert reasons(failures) == lines


def test_a_case_s_drops_are_one_entry_a_family_its_worst_k_first() -> None:
    regressions = [
        Regression("a", "hit_rate@3", 1.0, 0.0),
        Regression("b", "rr", 1.0, 0.0),
        Regression("a", "hit_rate@1", 1.0, 0.0),
        Regression("a", "hit_rate@10", 1.0, 0.0),
        Regression("a", "precision@1", 1.0, 0.0),
        Regression("a", "precision@10", 0.2, 0.0),
        Regression("a", "ap@5", 0.5, 0.25),
    ]
    assert family_drops(regressions) == {
        "a": [
            FamilyDrop(Regression("a", "hit_rate@1", 1.0, 0.0), ("@3", "@10")),
            FamilyDrop(Regression("a", "precision@1", 1.0, 0.0), ("@10",)),
            FamilyDrop(Regression("a", "ap@5", 0.5, 0.25)),
        ],
        "b": [FamilyDrop(Regression("b", "rr", 1.0, 0.0))],
    }
    assert family_drops(regressions)["a"][0].also_text == " (also dropped at @3, @10)"
    assert family_drops(regressions)["b"][0].also_text == ""


JUDGED_NOW = {"judged@5": 0.4, "judged@10": 0.31, "hit_rate@5": 0.5, "mrr": 0.5}
JUDGED_FELL = {"judged@5": -0.2, "judged@10": -0.31}
NOTE_10 = "judged@10 fell from 0.62 to 0.31: new unjudged documents may explain part of this drop"


@pytest.mark.parametrize(
    ("failures", "metrics", "deltas", "note"),
    [
        pytest.param([drop("hit_rate@10", 0.2)], JUDGED_NOW, JUDGED_FELL, NOTE_10, id="drop-at-k"),
        # MRR counts down to depth: it is read with the largest k.
        pytest.param([drop("mrr", 0.2)], JUDGED_NOW, JUDGED_FELL, NOTE_10, id="mrr-largest-k"),
        # Of several cut-offs the largest fall is named, not the first.
        pytest.param(
            [drop("hit_rate@5", 0.2), drop("ndcg@10", 0.1)],
            JUDGED_NOW,
            JUDGED_FELL,
            NOTE_10,
            id="largest-fall",
        ),
        pytest.param(
            [drop("hit_rate@5", 0.2)],
            JUDGED_NOW,
            JUDGED_FELL,
            "judged@5 fell from 0.60 to 0.40: new unjudged documents may explain part of this drop",
            id="only-the-failing-k",
        ),
        pytest.param(
            [floor("precision@5", 0.1)],
            JUDGED_NOW,
            JUDGED_FELL,
            "judged@5 fell from 0.60 to 0.40: new unjudged documents may explain part of this "
            "failure",
            id="floor",
        ),
        # bpref passes unlabelled ids over: they cannot explain its drop.
        pytest.param([drop("bpref", 0.2)], JUDGED_NOW, JUDGED_FELL, None, id="bpref"),
        pytest.param(
            [drop("hit_rate@10", 0.2)],
            JUDGED_NOW,
            {"judged@10": 0.1},
            None,
            id="judged-rose",
        ),
        pytest.param([drop("hit_rate@10", 0.2)], JUDGED_NOW, {}, None, id="no-baseline"),
        pytest.param([OVERLAP, LEAK, LOW], JUDGED_NOW, JUDGED_FELL, None, id="not-a-metric"),
        pytest.param([drop("hit_rate@3", 0.2)], JUDGED_NOW, JUDGED_FELL, None, id="k-not-judged"),
        pytest.param([], JUDGED_NOW, JUDGED_FELL, None, id="passed"),
    ],
)
def test_the_note_names_a_judged_share_that_fell_under_a_failing_metric(
    failures: list[Failure],
    metrics: dict[str, float],
    deltas: dict[str, float],
    note: str | None,
) -> None:
    """Only failures that unlabelled ids can explain, with their judged share fallen, get it."""
    assert unjudged_note(failures, metrics, deltas) == note


def test_the_note_follows_the_metric_lines_and_precedes_the_rest() -> None:
    lines = reasons([LEAK, drop("hit_rate@10", 0.2), OVERLAP], notes=[NOTE_10])
    assert lines == ["hit_rate@10 dropped 0.2", NOTE_10, OVERLAP.message, LEAK.message]
