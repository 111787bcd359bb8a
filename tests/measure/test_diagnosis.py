"""Which layer broke: each lost id's reason, the run's cause, lost documents in the verdict, and
canaries answered with fewer results than asked for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.diagnosis import Diagnosis, diagnose
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.lost_ids import (
    AnnRecall,
    IndexEvidence,
    LostId,
    Ranking,
    ann_recall,
    lost_ids,
    normalised,
)
from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import build_report
from ragcanary.measure.settings import Settings
from ragcanary.measure.short_results import ShortResults, short_results
from ragcanary.measure.vectors import EmbeddingDrift
from ragcanary.suites.judge import settings_for

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
# Eight canaries, each with its own relevant document: enough that losing one or two is well
# below what the significance test can see.
CASES = [case(f"c{i}", [f"d{i}"]) for i in range(8)]


def _settings(**thresholds: object) -> Settings:
    config = SuiteConfig(cases="s.yaml", targets=["t"], k=[1, 3], thresholds=thresholds)
    return settings_for(config)


def _runs(changed: dict[int, list[str]]) -> tuple[RunResult, RunResult]:
    """A baseline where every canary finds its document first, and a run where the canaries
    in ``changed`` return those ids instead."""
    baseline = run([(c, answer([f"d{i}", "x", "y"])) for i, c in enumerate(CASES)], "base")
    current = run(
        [(c, answer(changed.get(i, [f"d{i}", "x", "y"]))) for i, c in enumerate(CASES)], "now"
    )
    return current, baseline


def test_an_id_the_index_no_longer_holds_is_not_in_index() -> None:
    current, baseline = _runs({2: ["x", "y", "z"]})
    found = lost_ids(current, baseline, IndexEvidence(frozenset({"d2"}), AT, 0.01), None)
    assert found["c2"] == (LostId("d2", "not_in_index"),)
    assert all(found[c.id] == () for c in CASES if c.id != "c2")


def test_an_id_that_came_back_under_another_spelling_is_id_renamed() -> None:
    """Checked before the look-up: the index no longer holds "d3" because it is "D3" now."""
    current, baseline = _runs({3: ["D3 ", "x", "y"]})
    found = lost_ids(current, baseline, IndexEvidence(frozenset({"d3"}), AT, 0.01), None)
    assert found["c3"] == (LostId("d3", "id_renamed"),)
    full_width = "\uff44\uff13"  # "d3" in full-width letters: NFKC folds them
    full_width = "\uff44\uff13"  # "d3" in full-width letters: NFKC folds them
    assert normalised(full_width) == normalised("D3") == "d3"


def test_a_moved_query_vector_explains_a_loss_the_index_does_not() -> None:
    current, baseline = _runs({1: ["x", "y", "z"], 4: ["x", "y", "z"]})
    moved = EmbeddingDrift(per_case={"c1": 0.4, "c4": 0.9999}, drift=0.3, changed_ratio=0.125)
    found = lost_ids(current, baseline, IndexEvidence(frozenset(), AT, 0.01), moved)
    assert found["c1"] == (LostId("d1", "query_moved"),)
    assert found["c4"] == (LostId("d4", "unknown"),)  # its vector did not move


def test_without_evidence_a_lost_id_is_unknown_and_nothing_is_claimed() -> None:
    current, baseline = _runs({5: ["x", "y", "z"]})
    found = lost_ids(current, baseline, IndexEvidence(), None)
    assert found["c5"] == (LostId("d5", "unknown"),)
    said = diagnose(
        found, outcome="regression", misread=False, evidence=IndexEvidence(),
        embedding=None, embedding_threshold=0.01,
    )  # fmt: skip
    assert said.cause == "unknown"
    assert not said.checked.index_lookup
    assert not said.checked.exact_search
    assert "not checked: index_lookup, query_vectors, exact_search" in said.summary


def test_an_unanswered_canary_loses_nothing() -> None:
    baseline = run([(c, answer([f"d{i}"])) for i, c in enumerate(CASES)], "base")
    current = run([(c, answer([], outcome="timeout")) for c in CASES], "now")
    assert lost_ids(current, baseline, IndexEvidence(frozenset({"d0"}), AT, 0.0), None) == {}


@pytest.mark.parametrize(
    ("outcome", "misread", "cause"),
    [("unavailable", False, "outage"), ("unavailable", True, "config"), ("ok", False, "none")],
)
def test_the_verdict_names_outages_config_and_healthy_runs(
    outcome: str, misread: bool, cause: str
) -> None:
    lost = {"c0": (LostId("d0", "not_in_index"),)}  # recorded, but not the cause of these
    said = diagnose(
        lost, outcome=outcome, misread=misread, evidence=IndexEvidence(frozenset({"d0"}), AT, 0),
        embedding=None, embedding_threshold=0.01,
    )  # fmt: skip
    assert said.cause == cause


def test_the_cause_is_the_one_that_accounts_for_the_most_lost_ids() -> None:
    lost = {
        "c0": (LostId("d0", "id_renamed"),),
        "c1": (LostId("d1", "not_in_index"), LostId("e1", "not_in_index")),
        "c2": (LostId("d2", "unknown"), LostId("e2", "unknown"), LostId("f2", "unknown")),
    }
    said = diagnose(
        lost, outcome="regression", misread=False, evidence=IndexEvidence(frozenset(), AT, 0.2),
        embedding=None, embedding_threshold=0.01,
    )  # fmt: skip
    assert said.cause == "index_lost"  # unknown never wins over a cause the evidence gives
    assert said.summary == "2 judged documents left the index: d1, e1"
    assert [c.cause for c in said.causes] == ["index_lost", "ids_changed", "unknown"]
    assert said.causes[0].cases == ("c1",)
    assert said.causes[0].ids == ("d1", "e1")
    assert said.causes[0].evidence == f"looked up at {AT.isoformat()}: not found"
    assert said.lookup_s == 0.2


def test_a_tie_goes_to_the_cause_listed_first() -> None:
    lost = {"c0": (LostId("d0", "id_renamed"),), "c1": (LostId("d1", "not_in_index"),)}
    said = diagnose(
        lost, outcome="regression", misread=False, evidence=IndexEvidence(frozenset(), AT, 0),
        embedding=None, embedding_threshold=0.01,
    )  # fmt: skip
    assert said.cause == "index_lost"


def test_drifted_query_vectors_are_the_cause_of_a_run_that_lost_nothing_else() -> None:
    moved = EmbeddingDrift(per_case={}, drift=0.2, changed_ratio=1.0)
    said = diagnose(
        {}, outcome="ok", misread=False, evidence=IndexEvidence(), embedding=moved,
        embedding_threshold=0.01,
    )  # fmt: skip
    assert said.cause == "query_embedding"
    assert said.checked.query_vectors


def test_one_deleted_document_fails_its_canary_and_the_run_whatever_the_test_says() -> None:
    """One canary of eight lost its document: too few for the significance test, but the
    index itself says the document is gone."""
    current, baseline = _runs({6: ["x", "y", "z"]})
    evidence = IndexEvidence(frozenset({"d6"}), AT, 0.01)
    settings = _settings()
    without = evaluate(current, settings, baseline)
    assert without.verdict.outcome == "ok"  # the test alone lets it pass
    judged = evaluate(current, settings, baseline, evidence)
    assert judged.verdict.outcome == "regression"
    [lost] = [f for f in judged.verdict.failures if f.kind == "lost_document"]
    assert lost.case == "c6"
    assert lost.amount == 1.0
    assert "d6 left the index" in lost.message
    assert "remove them from the case" in lost.message
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "index_lost"


def test_lost_documents_under_the_threshold_or_turned_off_do_not_fail_the_run() -> None:
    current, baseline = _runs({6: ["x", "y", "z"]})
    evidence = IndexEvidence(frozenset({"d6"}), AT, 0.01)
    for threshold in (0, 2):
        judged = evaluate(current, _settings(lost_documents=threshold), baseline, evidence)
        assert judged.verdict.outcome == "ok"
        assert judged.diagnosis is not None
        assert judged.diagnosis.cause == "none"
        assert judged.lost["c6"] == (LostId("d6", "not_in_index"),)  # recorded all the same


def test_the_diagnosis_and_the_lost_ids_are_in_the_report_and_read_back_equal() -> None:
    current, baseline = _runs({6: ["x", "y", "z"]})
    judged = evaluate(current, _settings(), baseline, IndexEvidence(frozenset({"d6"}), AT, 0.01))
    report = build_report(judged)
    data = marshal(report)
    assert data["diagnosis"]["cause"] == "index_lost"
    assert data["diagnosis"]["checked"] == {
        "index_lookup": True, "exact_search": False, "query_vectors": False,
    }  # fmt: skip
    [entry] = [c for c in data["cases"] if c["id"] == "c6"]
    assert entry["vs_baseline"]["lost"] == [{"id": "d6", "why": "not_in_index"}]
    assert unmarshal(data) == report
    # A report from before the diagnosis has neither, and gains neither on the way back.
    older = replace(report, diagnosis=None)
    assert "diagnosis" not in marshal(older)


def test_a_failed_run_without_a_baseline_says_there_was_nothing_to_compare_with() -> None:
    """A floor fails a first run: no id could leave, and the diagnosis says why it is unknown."""
    current, _ = _runs({0: ["x"], 1: ["x"], 2: ["x"], 3: ["x"]})
    judged = evaluate(current, _settings(hit_rate={1: 0.9}))
    assert judged.verdict.outcome == "regression"
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "unknown"
    assert "(no baseline run: nothing to compare the run with)" in judged.diagnosis.summary


# Exact scores: ann_miss, doc_changed, outranked ------------------------------------------------

# Distances (lower is better): the baseline ranks d at 0.10, the run returns three others.
BEFORE = answer(["d", "x", "y"], [0.10, 0.20, 0.30])
NOW = answer(["a", "b", "c"], [0.05, 0.08, 0.12])
ASC = Ranking(order="asc", depth=3, score_drift=0.03)


def _one(now: object, exact: float | None, ranking: Ranking = ASC) -> str:
    """Why ``d`` left canary c (answered ``now``) when its exact score now is ``exact``."""
    lost_case = case("c", ["d"])
    current = run([(lost_case, now)], "now")  # type: ignore[list-item]
    baseline = run([(lost_case, BEFORE)], "base")
    scored = {"c": {"d": exact}} if exact is not None else {}
    evidence = IndexEvidence(frozenset(), AT, 0.01, scored)
    return lost_ids(current, baseline, evidence, None, ranking)["c"][0].why


@pytest.mark.parametrize(
    ("exact", "why"),
    [
        (0.10, "ann_miss"),  # as near as before, and nearer than the k-th returned (0.12)
        (0.11, "ann_miss"),
        (0.12, "outranked"),  # a tie with the k-th is no miss; its score moved 0.02 only
        (0.125, "outranked"),
        (0.131, "doc_changed"),  # moved 0.031: past score_drift (0.03)
        (0.20, "doc_changed"),  # moved 0.10 against the baseline's 0.10
        (0.04, "ann_miss"),  # nearer than anything returned
    ],
)
def test_an_exact_score_names_a_miss_a_change_or_being_outranked(exact: float, why: str) -> None:
    assert _one(NOW, exact) == why


def test_similarities_rank_the_other_way() -> None:
    desc = Ranking(order="desc", depth=3, score_drift=0.03)
    before, now = (
        answer(["d", "x", "y"], [0.9, 0.8, 0.7]),
        answer(["a", "b", "c"], [0.95, 0.92, 0.91]),
    )
    lost_case = case("c", ["d"])
    for exact, why in ((0.915, "ann_miss"), (0.9, "outranked"), (0.5, "doc_changed")):
        evidence = IndexEvidence(frozenset(), AT, 0.01, {"c": {"d": exact}})
        current, baseline = run([(lost_case, now)], "now"), run([(lost_case, before)], "base")
        assert lost_ids(current, baseline, evidence, None, desc)["c"][0].why == why, exact


def test_a_held_id_missing_from_a_short_answer_was_missed_by_the_search() -> None:
    """Fewer than k results and the id held: an exact search would have returned it."""
    assert _one(answer(["a"], [0.05]), 0.5) == "ann_miss"


def test_without_an_exact_score_nothing_is_claimed() -> None:
    assert _one(NOW, None) == "unknown"
    assert _one(answer(["a", "b", "c"], [0.05, 0.08, None]), 0.11) == "unknown"  # type: ignore[list-item]


def test_a_moved_query_comes_before_an_exact_score() -> None:
    lost_case = case("c", ["d"])
    current, baseline = run([(lost_case, NOW)], "now"), run([(lost_case, BEFORE)], "base")
    moved = EmbeddingDrift(per_case={"c": 0.5}, drift=0.5, changed_ratio=1.0)
    evidence = IndexEvidence(frozenset(), AT, 0.01, {"c": {"d": 0.11}})
    assert lost_ids(current, baseline, evidence, moved, ASC)["c"][0].why == "query_moved"


@pytest.mark.parametrize(
    ("exact", "cause", "summary"),
    [
        (0.11, "ann_miss", "missed by the approximate search although in the index: d"),
        (0.20, "index_changed", "changed in the index (re-chunked or re-embedded): d"),
        (0.12, "outranked", "outranked by other documents: d"),
    ],
)  # fmt: skip
def test_the_run_is_named_for_what_the_exact_scores_showed(
    exact: float, cause: str, summary: str
) -> None:
    lost_case = case("c", ["d"])
    current, baseline = run([(lost_case, NOW)], "now"), run([(lost_case, BEFORE)], "base")
    evidence = IndexEvidence(frozenset(), AT, 0.01, {"c": {"d": exact}})
    found = lost_ids(current, baseline, evidence, None, ASC)
    said = diagnose(
        found, outcome="regression", misread=False, evidence=evidence,
        embedding=None, embedding_threshold=0.01,
    )  # fmt: skip
    assert (said.cause, said.summary) == (cause, f"1 judged document {summary}")
    assert said.checked.exact_search
    assert [(c.cause, c.cases, c.ids) for c in said.causes] == [(cause, ("c",), ("d",))]
    assert AT.isoformat() in said.causes[0].evidence


def test_scores_that_moved_while_the_queries_did_not_name_a_changed_index() -> None:
    """No id left, the verdict passed, but most scores moved beyond score_drift and the query
    vectors stayed: the documents changed (a drift threshold crossed, so not ``none``)."""
    still = EmbeddingDrift(per_case={"c0": 1.0}, drift=0.0, changed_ratio=0.0)

    def said(ratio: float, embedding: EmbeddingDrift | None) -> tuple[str, str]:
        found = diagnose(
            {}, outcome="ok", misread=False, evidence=IndexEvidence(), embedding=embedding,
            embedding_threshold=0.01, score_drifted_ratio=ratio,
        )  # fmt: skip
        return found.cause, found.summary

    cause, summary = said(0.8, still)
    assert cause == "index_changed"
    assert "80% of the (canary, id) pairs" in summary
    assert said(0.5, still)[0] == "none"  # the alert's own line: over half
    assert said(0.8, None)[0] == "unknown"  # without query vectors either side may have moved


# Short results: fewer answers than asked for, without labels -----------------------------------

SHORT = ShortResults(depth=10, cases=("c1", "c4", "c7", "c8"), shorter=("c1", "c4", "c7"))


def _said(
    lost: dict[str, tuple[LostId, ...]],
    short: ShortResults | None,
    outcome: str = "regression",
    embedding: EmbeddingDrift | None = None,
) -> Diagnosis:
    return diagnose(
        lost, outcome=outcome, misread=False, evidence=IndexEvidence(), embedding=embedding,
        embedding_threshold=0.01, short=short,
    )  # fmt: skip


def test_short_results_counts_answered_canaries_under_depth_and_those_shorter_than_before() -> None:
    cases = [case(f"c{i}", [f"d{i}"]) for i in range(5)]
    baseline = run(
        [
            (cases[0], answer(["d0", "x", "y"])),
            (cases[1], answer(["d1", "x", "y"])),
            (cases[2], answer(["d2"])),  # short in both runs, as short now as then
            (cases[3], answer([], outcome="timeout")),  # unanswered then: no evidence
            (cases[4], answer(["d4", "x", "y"])),
        ],
        "base",
    )
    current = run(
        [
            (cases[0], answer(["d0", "x", "y"])),  # as deep as asked
            (cases[1], answer(["d1"])),  # shorter than in the baseline
            (cases[2], answer(["d2"])),
            (cases[3], answer(["d3"])),
            (cases[4], answer([])),  # empty is short too
        ],
        "now",
    )
    found = short_results(current, baseline, depth=3)
    assert found == ShortResults(3, ("c1", "c2", "c3", "c4"), ("c1", "c4"))
    assert short_results(current, None, depth=3).shorter == ()  # nothing to compare with
    timed_out = run([(c, answer([], outcome="timeout")) for c in cases], "down")
    assert short_results(timed_out, baseline, depth=3) == ShortResults(3)  # unanswered: not short


def test_a_regression_no_lost_id_explains_is_named_for_canaries_that_came_back_short() -> None:
    said = _said({}, SHORT)
    assert said.cause == "short_results"
    assert said.summary == "3 canaries answered with fewer than 10 results: c1, c4, c7"
    [short] = said.causes
    assert (short.cause, short.cases, short.ids) == ("short_results", ("c1", "c4", "c7"), ())
    assert "fewer than 10 results" in short.evidence
    assert "4 short in this run" in short.evidence


def test_one_canary_short_and_more_than_five_are_summarised_in_few_words() -> None:
    one = ShortResults(depth=3, cases=("q2",), shorter=("q2",))
    assert _said({}, one).summary == "1 canary answered with fewer than 3 results: q2"
    many = tuple(f"q{i}" for i in range(7))
    said = _said({}, ShortResults(depth=3, cases=many, shorter=many))
    assert said.summary.endswith(": q0, q1, q2, q3, q4 and 2 more")


def test_short_results_lead_over_unknown_lost_ids_but_never_over_a_known_cause() -> None:
    """Short answers are listed beside every cause; they lead only when nothing else does."""
    unknown = {"c1": (LostId("d1", "unknown"),)}
    said = _said(unknown, SHORT)
    assert said.cause == "short_results"
    assert [c.cause for c in said.causes] == ["short_results", "unknown"]
    gone = {"c1": (LostId("d1", "not_in_index"),), "c2": (LostId("d2", "unknown"),)}
    said = _said(gone, SHORT)
    assert said.cause == "index_lost"
    assert [c.cause for c in said.causes] == ["index_lost", "short_results", "unknown"]


def test_drifted_query_vectors_lead_over_short_results() -> None:
    moved = EmbeddingDrift(per_case={}, drift=0.2, changed_ratio=1.0)
    said = _said({}, SHORT, outcome="ok", embedding=moved)
    assert said.cause == "query_embedding"
    assert [c.cause for c in said.causes] == ["short_results"]


def test_a_passing_run_with_short_answers_has_no_cause_but_lists_them() -> None:
    said = _said({}, SHORT, outcome="ok")
    assert said.cause == "none"
    assert [c.cause for c in said.causes] == ["short_results"]


@pytest.mark.parametrize(
    "short",
    [None, ShortResults(depth=10), ShortResults(depth=10, cases=("c1", "c4"))],
    ids=["not-counted", "none-short", "no-shorter-than-the-baseline"],
)
def test_answers_no_shorter_than_the_baseline_s_name_nothing(short: ShortResults | None) -> None:
    said = _said({}, short)
    assert said.cause == "unknown"
    assert said.causes == ()


def _short_config(**thresholds: object) -> Settings:
    config = SuiteConfig(cases="s.yaml", targets=["t"], k=[1, 3], depth=5, thresholds=thresholds)
    return settings_for(config)


def test_a_filter_that_leaves_fewer_than_depth_results_regresses_by_rank_overlap() -> None:
    """Every canary keeps its relevant document first, so no quality metric moves; three lists
    shrink from 5 to 2 (the filter took ids from their middle: a list cut short at its end
    keeps an RBO of 1) and their overlap with the baseline's falls under min_rank_overlap."""
    baseline = run([(c, answer([f"d{i}", "a", "b", "c", "e"])) for i, c in enumerate(CASES)], "b")
    shrunk = {2: ["d2", "b"], 5: ["d5", "c"], 6: ["d6", "e"]}
    current = run(
        [(c, answer(shrunk.get(i, [f"d{i}", "a", "b", "c", "e"]))) for i, c in enumerate(CASES)],
        "now",
    )
    judged = evaluate(current, _short_config(min_rank_overlap=0.95), baseline)
    assert judged.verdict.outcome == "regression"
    assert [f.kind for f in judged.verdict.failures] == ["rank_overlap"]
    assert all(ids == () for ids in judged.lost.values())
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "short_results"
    assert judged.diagnosis.summary == "3 canaries answered with fewer than 5 results: c2, c5, c6"
    report = build_report(judged)
    assert report.counts.short == 3
    assert marshal(report)["counts"]["short"] == 3
    # Without the overlap floor the same run passes: no cause, the short answers still listed.
    passed = evaluate(current, _short_config(min_rank_overlap=None), baseline)
    assert passed.verdict.outcome == "ok"
    assert passed.diagnosis is not None
    assert passed.diagnosis.cause == "none"
    assert [c.cause for c in passed.diagnosis.causes] == ["short_results"]


def test_a_first_run_counts_its_short_answers_and_names_no_cause_from_them() -> None:
    current = run([(c, answer([f"d{i}"])) for i, c in enumerate(CASES)], "first")
    judged = evaluate(current, _short_config())
    assert judged.diagnosis is not None
    assert judged.diagnosis.cause == "none"
    assert judged.diagnosis.causes == ()
    assert build_report(judged).counts.short == len(CASES)


# The approximate search's recall on judged documents ---------------------------------------------


def _vectored(pairs: list[tuple[object, object]], run_id: str) -> RunResult:
    """A run whose canaries were searched by vector."""
    plain = run(pairs, run_id)  # type: ignore[arg-type]
    return replace(plain, results=tuple(replace(r, vector=(1.0, 0.0)) for r in plain.results))


def test_ann_recall_is_the_share_of_held_judged_ids_the_search_did_not_miss() -> None:
    cases = [case("c0", ["d0", "e0"]), case("c1", ["d1"]), case("c2", ["d2"])]
    baseline = _vectored([(c, answer([*c.relevant, "x"])) for c in cases], "base")  # type: ignore[union-attr]
    now = _vectored([(cases[0], answer(["e0", "x"])), (cases[1], answer(["x"])),
                     (cases[2], answer(["x"]))], "now")  # fmt: skip
    lost = {
        "c0": (LostId("d0", "ann_miss"),),
        "c1": (LostId("d1", "not_in_index"),),  # gone: no longer there to be found
        "c2": (LostId("d2", "outranked"),),
    }
    recall = ann_recall(now, baseline, lost, depth=3)
    assert recall == AnnRecall(3, 1 - 1 / 3, 3)  # d0, e0, d2 held; d0 missed
    assert ann_recall(baseline, baseline, {c.id: () for c in cases}, 3) == AnnRecall(3, 1.0, 4)


def test_ann_recall_cannot_be_told_without_vectors_a_baseline_or_a_reason() -> None:
    cases = [case("c0", ["d0"])]
    baseline = _vectored([(cases[0], answer(["d0"]))], "base")
    now = _vectored([(cases[0], answer(["x"]))], "now")
    assert ann_recall(now, baseline, {"c0": (LostId("d0", "unknown"),)}, 3) is None
    assert ann_recall(now, None, {}, 3) is None
    by_text = run([(cases[0], answer(["d0"]))], "now")
    assert ann_recall(by_text, baseline, {"c0": ()}, 3) is None
