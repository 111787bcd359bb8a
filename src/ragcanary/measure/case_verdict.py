"""A canary's verdict in one run: ok, regressed, leaked, missed_min_score or unanswered.

The query outcome (``ok``, ``timeout``, ``http_5xx``...) says whether the target answered; the
verdict says what the run's judgement made of the answer. A canary whose relevant documents
all left its top-k was answered (query outcome ``ok``) and regressed. The verdict is taken
from what the run's report records (its ``regressions`` and ``failures``), never recomputed,
so the history, the API and the case page say what the run decided, and exactly what
``ragcanary_regressed_cases`` and ``ragcanary_negative_leaks`` counted.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ragcanary.measure.results import ANSWERED
from ragcanary.measure.run_report import RunReport

CaseVerdict = Literal["ok", "regressed", "leaked", "missed_min_score", "unanswered"]
CASE_VERDICTS: tuple[CaseVerdict, ...] = get_args(CaseVerdict)


def case_verdict(
    outcome: object, regressed: bool = False, failed: Collection[str] = ()
) -> CaseVerdict:
    """The verdict of one canary in one run.

    ``outcome`` is its query outcome; ``regressed`` whether the run listed it among its
    ``regressions`` (a metric below the baseline's, answered in both runs); ``failed`` the
    kinds of the run's ``failures`` that name it (``negative_leak``: a negative canary whose
    best score is on the better side of its ``max_score``; ``min_score``). A query that
    failed is ``unanswered`` whatever else holds: nothing was judged of it.
    """
    if not isinstance(outcome, str) or outcome not in ANSWERED:  # any value a report holds
        return "unanswered"
    if "negative_leak" in failed:
        return "leaked"
    if regressed:
        return "regressed"
    if "min_score" in failed:
        return "missed_min_score"
    return "ok"


@dataclass(frozen=True)
class RunFindings:
    """What a run's judgement said of its cases: those it listed as regressed, and the kinds
    of failure that name each case."""

    regressed: frozenset[str] = frozenset()
    failed: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, regressions: Any, failures: Any) -> RunFindings:
        """From a report's ``regressions`` and ``failures`` lists; anything else in them (a
        hand-written report's) is left out."""
        regressed = frozenset(str(r["case"]) for r in _entries(regressions) if r.get("case"))
        failed: dict[str, set[str]] = {}
        for failure in _entries(failures):
            if failure.get("case"):
                failed.setdefault(str(failure["case"]), set()).add(str(failure.get("kind")))
        return cls(regressed, {case: frozenset(kinds) for case, kinds in failed.items()})

    @classmethod
    def of_report(cls, report: RunReport) -> RunFindings:
        """From a report's ``regressions`` and ``failures``."""
        failed: dict[str, set[str]] = {}
        for failure in report.failures:
            if failure.case:
                failed.setdefault(failure.case, set()).add(failure.kind)
        return cls(
            frozenset(r.case for r in report.regressions if r.case),
            {case: frozenset(kinds) for case, kinds in failed.items()},
        )

    def verdict(self, case: str, outcome: object) -> CaseVerdict:
        """The verdict of ``case``, whose query outcome was ``outcome``."""
        return case_verdict(outcome, case in self.regressed, self.failed.get(case, ()))


def case_verdicts(report: RunReport) -> dict[str, CaseVerdict]:
    """The verdict of every case of a report, by case id."""
    findings = RunFindings.of_report(report)
    return {entry.id: findings.verdict(entry.id, entry.outcome) for entry in report.cases}


def _entries(items: Any) -> Iterable[Mapping[str, Any]]:
    return (i for i in items if isinstance(i, Mapping)) if isinstance(items, list) else ()
