"""Which layer broke: each lost id's reason, the run's cause, and lost documents in the verdict."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from factories import answer, case, run

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.diagnosis import IndexEvidence, LostId, diagnose, lost_ids, normalised
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import build_report
from ragcanary.measure.settings import Settings
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
