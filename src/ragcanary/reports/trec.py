"""A stored run and its suite's labels as TREC files, for trec_eval and ir_measures.

Run file lines are ``qid Q0 docid rank score tag``; qrels lines ``qid 0 docid grade``. trec_eval
re-sorts each query's list by score (ties by docid), so the score written is not the target's:
it is ``len(list) - rank + 1`` per query, strictly decreasing in the order the target returned.
The target's own scores may tie, or run the other way (distances), and would then reorder the
list. Duplicate ids keep their first position, as ragcanary scores them; unanswered queries
have no line (they lower coverage, not a metric).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragcanary.measure.cases import Case
from ragcanary.measure.run_report import RunReport

_SPACE = re.compile(r"\s")


def run_file(report: RunReport, tag: str = "ragcanary") -> str:
    """The report's answered cases as a TREC run file."""
    lines = []
    for case in report.cases:
        if case.error:
            continue
        ids = list(dict.fromkeys(case.ids))
        qid = _field(case.id, "case id")
        for rank, doc in enumerate(ids, start=1):
            score = len(ids) - rank + 1
            lines.append(f"{qid} Q0 {_field(doc, 'document id')} {rank} {score} {tag}")
    return "".join(line + "\n" for line in lines)


def qrels_file(cases: Iterable[Case]) -> str:
    """Every judgement of the labelled cases as a TREC qrels file."""
    lines = [
        f"{_field(case.id, 'case id')} 0 {_field(doc, 'document id')} {grade}"
        for case in cases
        if case.kind == "labelled"
        for doc, grade in (case.relevant or {}).items()
    ]
    return "".join(line + "\n" for line in lines)


def _field(value: str, what: str) -> str:
    """``value`` as one whitespace-free TREC field."""
    if not value or _SPACE.search(value):
        raise ValueError(
            f"{what} {value!r} has white space; TREC files separate fields by white space"
        )
    return value
