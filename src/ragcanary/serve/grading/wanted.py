"""Which documents a run asks its suite's judge to grade."""

from __future__ import annotations

from ragcanary.measure.cases import Suite
from ragcanary.measure.run_report import RunReport
from ragcanary.store.judgments import Wanted


def entered_unlabelled(report: RunReport, suite: Suite) -> list[Wanted]:
    """The ids that entered a labelled canary's top-k against the baseline (the case entry's
    ``vs_baseline.entered``) and that its labels do not judge, in report order.

    Only labelled canaries: for a label-free one every id is unjudged by design, and a
    negative canary has no relevant id a new document could push down. A case whose query
    changed in the suite file since the run is left out: its grade would be for another query.
    """
    found: list[Wanted] = []
    for entry in report.cases:
        case = suite.by_id.get(entry.id)
        comparison = entry.vs_baseline
        if case is None or comparison is None or case.kind != "labelled":
            continue
        if case.query != entry.query:
            continue
        labels = case.relevant or {}
        found.extend(
            Wanted(report.suite, report.target, entry.id, doc, entry.query, report.run_id)
            for doc in comparison.entered
            if doc not in labels
        )
    return found
