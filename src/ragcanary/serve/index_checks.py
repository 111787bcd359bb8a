"""When each (suite, target) pair last asked its index which relevant ids it no longer holds.

Asking costs the target requests (Vespa: one per id), so the daemon asks at most once per
``stale_label_runs`` runs of the pair or once an hour, whichever comes first, and meanwhile
reuses the last answer. A changed question (other relevant ids, another target config)
is asked at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

CHECK_EVERY_S = 3600.0

Pair = tuple[str, str]


@dataclass
class _Answer:
    question: object  # what was asked: the ids and the target's config
    at: float  # when, on the monotonic clock
    runs: int  # runs of the pair since
    missing: frozenset[str] | None  # None: the target could not tell


class IndexChecks:
    """The last answer of each pair, and whether a run should ask again."""

    def __init__(
        self, every_s: float = CHECK_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s = every_s
        self._clock = clock
        self._answers: dict[Pair, _Answer] = {}

    def due(self, pair: Pair, question: object, runs: int) -> bool:
        """Whether this run of ``pair`` should ask ``question``: never asked, asked otherwise,
        ``runs`` runs or ``every_s`` seconds ago. Counts the run."""
        answer = self._answers.get(pair)
        if answer is None or answer.question != question:
            return True
        answer.runs += 1
        return answer.runs >= runs or self._clock() - answer.at >= self.every_s

    def remember(self, pair: Pair, question: object, missing: set[str] | None) -> None:
        """The answer to ``question`` just received."""
        frozen = frozenset(missing) if missing is not None else None
        self._answers[pair] = _Answer(question, self._clock(), 0, frozen)

    def last(self, pair: Pair) -> frozenset[str] | None:
        """The ids the last answer said are missing; None if it could not tell (or none yet)."""
        answer = self._answers.get(pair)
        return answer.missing if answer is not None else None
