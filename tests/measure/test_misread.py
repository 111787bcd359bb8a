"""A run its config misread: answers came back, the response paths found nothing in any."""

from __future__ import annotations

import pytest
from factories import answer, case, run

from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.results import Answer, PathMiss
from ragcanary.measure.settings import Settings
from ragcanary.measure.verdict import Policy

SETTINGS = Settings((1, 5), 10, "linear", 0.05, Policy(min_coverage=0.9), "desc")


def _missed(field: str = "results", path: str = "hit", *keys: str) -> Answer:
    miss = PathMiss(field, path, keys or ("data", "took"))  # type: ignore[arg-type]
    return Answer((), (), 0.01, "bad_response", f"no list of hits at {path!r}", miss)


@pytest.mark.parametrize(
    ("answers", "failure"),
    [
        pytest.param(
            [_missed(), _missed(), _missed()],
            "targets.search.results: 'hit' matched nothing in the 3 answers that came back "
            "(HTTP 2xx); they hold the keys data, took; set results to",
            id="every-answer-missed",
        ),
        pytest.param(
            [_missed("id", "doc_id", "chunk"), answer([], outcome="timeout"), answer([])],
            "targets.search.id: 'doc_id' matched nothing in the hits of the 1 answer that came "
            "back (HTTP 2xx); they hold the keys chunk; set id to",
            id="one-answer-among-timeouts-and-empties",
        ),
        pytest.param(
            [_missed(), _missed(), answer(["a"]), answer([], outcome="timeout")] * 3,
            "coverage 25% is below min_coverage 90%",
            id="an-answer-was-read",
        ),
        pytest.param(
            [answer([], outcome="http_5xx")] * 3,
            "coverage 0% is below min_coverage 90%",
            id="no-answer-came-back",
        ),
    ],
)
def test_an_unavailable_run_is_a_config_error_only_when_no_answer_fit_the_paths(
    answers: list[Answer], failure: str
) -> None:
    cases = [case(f"c{i}", ["a"]) for i in range(len(answers))]
    evaluation = evaluate(run(list(zip(cases, answers, strict=True))), SETTINGS)
    assert evaluation.verdict.outcome == "unavailable"
    (only,) = evaluation.verdict.failures
    assert only.message.startswith(failure)
    assert only.kind == ("config" if evaluation.misread else "coverage")


def test_a_run_covered_enough_is_judged_whatever_some_answers_missed() -> None:
    """A hit without an id in one answer of twenty is the target's data, judged as usual."""
    cases = [case(f"c{i}", ["a"]) for i in range(20)]
    answers = [answer([])] * 19 + [_missed("id", "id", "score")]
    evaluation = evaluate(run(list(zip(cases, answers, strict=True))), SETTINGS)
    assert evaluation.verdict.outcome == "ok"  # coverage 95%, no floor: judged, and passed
    assert evaluation.misread is None
