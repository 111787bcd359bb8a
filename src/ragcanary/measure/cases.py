"""Canary cases and suites as plain records: what measure scores, whatever file they came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

CaseKind = Literal["labelled", "negative", "label_free"]


@dataclass(frozen=True)
class Case:
    """One canary query and what a good answer to it looks like.

    ``relevant`` maps judged ids to grades: grade > 0 is relevant, 0 is judged
    non-relevant. ``None`` means label-free (drift only); an empty map is a
    negative canary (nothing should score at or above ``max_score``).
    """

    id: str
    query: str
    relevant: Mapping[str, int] | None = None
    tags: tuple[str, ...] = ()
    weight: float = 1.0
    min_score: float | None = None
    max_score: float | None = None

    @property
    def kind(self) -> CaseKind:
        if self.relevant is None:
            return "label_free"
        if not any(grade > 0 for grade in self.relevant.values()):
            return "negative"
        return "labelled"


@dataclass(frozen=True)
class Suite:
    """The cases of one suite file (``source``, when it was read from one)."""

    cases: tuple[Case, ...]
    source: Path | None = None
    by_id: Mapping[str, Case] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", {c.id: c for c in self.cases})
