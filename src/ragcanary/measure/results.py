"""Plain records of one run: what the target answered for each case, and the run around them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from ragcanary.measure.cases import Case
from ragcanary.measure.fingerprint import Fingerprint

Outcome = Literal[
    "ok",
    "timeout",
    "connect_error",
    "http_4xx",
    "http_5xx",
    "rate_limited",
    "bad_response",
    "empty",
    "embedding_error",  # the query could not be embedded, so the target was never asked
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
# An empty hit list is an answer (the retriever found nothing); every other non-ok
# outcome means the query went unanswered and must not count as a miss.
ANSWERED: frozenset[Outcome] = frozenset({"ok", "empty"})

# How a target's scores rank: desc, a similarity (higher is better, the default); asc, a
# distance (lower is better). Scores are kept as the target returned them either way.
ScoreOrder = Literal["desc", "asc"]


PathField = Literal["results", "id", "score"]  # the response paths of a target's config


@dataclass(frozen=True)
class PathMiss:
    """An answer that came back (2xx, JSON) in which a configured response path found nothing.

    ``keys`` are the keys present where the path was looked for: the answer's own (``results``),
    or its hits' (``id``, ``score``). A run whose every answer is such a miss has a wrong config,
    not a target outage.
    """

    field: PathField
    path: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    """What one query to a target produced: the ranked ids in the target's order, or a failure."""

    ids: tuple[str, ...]
    scores: tuple[float | None, ...]
    latency_s: float
    outcome: Outcome
    error: str | None = None  # human-readable reason when outcome is a failure; never a secret
    miss: PathMiss | None = None  # a bad_response whose JSON the configured paths did not fit

    @property
    def answered(self) -> bool:
        return self.outcome in ANSWERED


@dataclass(frozen=True)
class CaseResult:
    """One case of a suite and the target's answer to it."""

    case: Case
    answer: Answer
    # The query's embedding when the target searched by vector: compared with the baseline's.
    vector: tuple[float, ...] | None = None


@dataclass(frozen=True)
class RunResult:
    """One cycle of a suite against a target."""

    suite: str
    target: str
    run_id: str
    started_at: datetime
    duration_s: float
    results: tuple[CaseResult, ...]
    # What the run was made with (config hashes, embedding model, the index's count); None
    # for a run rebuilt from a report (a baseline) or made without a config.
    fingerprint: Fingerprint | None = None

    @property
    def coverage(self) -> float:
        """Answered cases over all cases (1.0 for an empty suite)."""
        if not self.results:
            return 1.0
        return sum(r.answer.answered for r in self.results) / len(self.results)


def answered_in_both(run: RunResult, baseline: RunResult) -> Iterator[tuple[CaseResult, Answer]]:
    """Each result of ``run`` answered in both runs, in ``run``'s order, with the baseline's
    answer to the same case: an unanswered query says nothing to compare."""
    before = {r.case.id: r.answer for r in baseline.results if r.answer.answered}
    for result in run.results:
        earlier = before.get(result.case.id)
        if earlier is not None and result.answer.answered:
            yield result, earlier
