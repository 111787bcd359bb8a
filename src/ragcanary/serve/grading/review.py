"""A person's decision on a proposed judgment: accepted (its grade written into the suite
file, comments kept, like `candidates promote`) or rejected (nothing written).

Shared by `ragcanary judgments accept|reject` on a local config and the daemon's API, so both
check and write alike. An accepted label counts from the next run that reads the suite file:
the daemon reloads after an accept through its API; after a local one, reload it yourself.
"""

from __future__ import annotations

from datetime import datetime

from ragcanary.errors import UsageError
from ragcanary.measure.agreement import Agreement, cohen_kappa, relevant
from ragcanary.serve.service import NoSuchJudgment
from ragcanary.store.judgments import Judgment, JudgmentStore
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.suites.promote import add_label
from ragcanary.suites.suite import load_suite


def find(judgments: JudgmentStore, judgment_id: int) -> Judgment:
    """The judgment ``judgment_id``; ``NoSuchJudgment`` when there is none."""
    found = judgments.get(judgment_id)
    if found is None:
        raise NoSuchJudgment(f"no judgment {judgment_id}; `ragcanary judgments list` shows them")
    return found


def decide(
    loaded: LoadedConfig, judgments: JudgmentStore, judgment_id: int, accept: bool, now: datetime
) -> Judgment:
    """Accept or reject the proposed judgment ``judgment_id``; the judgment as decided.

    Raises ``UsageError`` (nothing written) when it is not proposed, when its suite or case
    is gone, when the case's query changed since it was graded, or when the case labels the
    id already; ``ConfigError`` when the suite would not load with the label.
    """
    judgment = find(judgments, judgment_id)
    if judgment.state != "proposed":
        raise UsageError(f"judgment {judgment_id} is {judgment.state}, not proposed")
    if accept:
        _write_label(loaded, judgment)
    if not judgments.decide(judgment_id, "accepted" if accept else "rejected", now):
        raise UsageError(f"judgment {judgment_id} was decided meanwhile")
    return find(judgments, judgment_id)


def _write_label(loaded: LoadedConfig, judgment: Judgment) -> None:
    config = loaded.config.suites.get(judgment.suite)
    if config is None:
        raise UsageError(f"suite {judgment.suite!r} is no longer in the config; reject it")
    assert judgment.grade is not None  # a proposed judgment has its grade
    path = (loaded.path.parent / config.cases).resolve()
    case = load_suite(path).by_id.get(judgment.case_id)
    if case is None:
        raise UsageError(f"{path} has no case {judgment.case_id!r} any more; reject it")
    if case.query != judgment.query:
        raise UsageError(
            f"case {judgment.case_id!r}'s query changed since it was graded "
            f"({judgment.query!r}); reject it: the grade is for the old query"
        )
    add_label(path, judgment.case_id, judgment.doc_id, judgment.grade)


def agreement(
    loaded: LoadedConfig, judgments: JudgmentStore, judge: str | None = None
) -> Agreement:
    """Cohen's kappa between ``judge``'s grades (every judge's, if None) and people.

    A person's verdict on a graded document is, first, the label the suite file gives it now
    (a label written by hand after a rejection, or by an accept); else, for a judgment
    without one, accepted agrees with the judge and rejected disagrees (a rejection says the
    judge is wrong about whether the document is relevant). Proposed judgments without a label
    are not counted. Binarised: a grade of 1 or more is relevant (``measure.agreement``).
    """
    pairs: list[tuple[bool, bool]] = []
    cases = {name: suite.by_id for name, suite in loaded.suites.items()}
    for judgment in judgments.graded():
        if judge is not None and judgment.judge != judge:
            continue
        assert judgment.grade is not None
        said = relevant(judgment.grade)
        case = cases.get(judgment.suite, {}).get(judgment.case_id)
        label = (case.relevant or {}).get(judgment.doc_id) if case is not None else None
        if label is not None and case is not None and case.query == judgment.query:
            pairs.append((said, relevant(label)))
        elif judgment.state == "accepted":
            pairs.append((said, said))
        elif judgment.state == "rejected":
            pairs.append((said, not said))
    return cohen_kappa(pairs)
