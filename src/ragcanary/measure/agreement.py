"""How far a judge agrees with people: Cohen's kappa over binarised relevance.

Each pair is (the judge's grade, the person's verdict), both binarised as trec_eval reads
relevance: a grade of 1 or more is relevant. Kappa is unweighted, over the two classes:
kappa = (p_o - p_e) / (1 - p_e), with p_o the share of pairs on which both agree and p_e the
share expected by chance from each rater's own share of relevant. Undefined (None) without
pairs or when chance agreement is certain (both raters put every pair in one class).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    """Kappa and what it is computed from."""

    pairs: int
    agreed: int
    kappa: float | None
    # [judge relevant & person relevant, judge relevant & person not, judge not & person
    # relevant, judge not & person not]
    table: tuple[int, int, int, int]

    @property
    def observed(self) -> float | None:
        """The share of pairs both put in the same class."""
        return self.agreed / self.pairs if self.pairs else None


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """Unweighted Cohen's kappa of (judge relevant, person relevant) pairs."""
    both = judge_only = person_only = neither = 0
    for judge, person in pairs:
        if judge and person:
            both += 1
        elif judge:
            judge_only += 1
        elif person:
            person_only += 1
        else:
            neither += 1
    n = both + judge_only + person_only + neither
    agreed = both + neither
    table = (both, judge_only, person_only, neither)
    if n == 0:
        return Agreement(0, 0, None, table)
    p_o = agreed / n
    judge_yes, person_yes = (both + judge_only) / n, (both + person_only) / n
    p_e = judge_yes * person_yes + (1 - judge_yes) * (1 - person_yes)
    kappa = None if p_e >= 1.0 else (p_o - p_e) / (1 - p_e)
    return Agreement(n, agreed, kappa, table)


def relevant(grade: int) -> bool:
    """A grade as binary relevance, as trec_eval reads it: 1 or more is relevant."""
    return grade >= 1
