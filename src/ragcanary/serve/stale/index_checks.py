"""What each (suite, target) pair's index last said of its relevant ids, and when it said it.

Asking about every relevant id costs the target requests (Vespa: one per id), so the daemon
asks about all of them at most once per ``stale_label_runs`` runs of the pair or once an hour,
whichever comes first. A changed question (other relevant ids, another target config) is
asked at once. In between, the ids that left their canary's top-k are asked about again in
the run that saw them leave (``update``): that is when a document goes, and a cached "still
held" would then say the opposite of the truth. Every answer keeps the wall-clock time it was
given, so reports and pages can say when the index was looked at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

CHECK_EVERY_S = 3600.0

Pair = tuple[str, str]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Answers:
    question: object  # what the last full check asked: the ids and the target's config
    at: float  # when it was asked, on the monotonic clock
    runs: int  # runs of the pair since
    checked_at: datetime | None = None  # when a full check last answered; None: none did
    # Relevant id -> (the index no longer holds it, when the index said so).
    known: dict[str, tuple[bool, datetime]] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexView:
    """What the index said of a pair's relevant ids, as far as it ever could tell."""

    missing: dict[str, datetime] | None  # id it no longer holds -> when; None: it never told
    checked_at: datetime | None  # when it last answered about every relevant id


class IndexChecks:
    """The index's answers for each pair, and whether a run should ask about every id again."""

    def __init__(
        self,
        every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.every_s = every_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._answers: dict[Pair, _Answers] = {}

    def due(self, pair: Pair, question: object, runs: int) -> bool:
        """Whether this run of ``pair`` should ask ``question`` (every relevant id): never
        asked, asked otherwise, ``runs`` runs or ``every_s`` seconds ago. Counts the run."""
        answer = self._answers.get(pair)
        if answer is None or answer.question != question:
            return True
        answer.runs += 1
        return answer.runs >= runs or self._clock() - answer.at >= self.every_s

    def now(self) -> datetime:
        """The wall-clock time an answer received now is stamped with."""
        return self._wall_clock()

    def remember(
        self,
        pair: Pair,
        question: object,
        ids: Iterable[str],
        missing: set[str] | None,
        at: datetime,
    ) -> None:
        """The answer to ``question`` about ``ids``, given at ``at``: the ids among them the
        index no longer holds, or None when it could not tell (what it said before stays,
        with its own times, and the next full check waits its turn all the same)."""
        previous = self._answers.get(pair)
        answer = _Answers(question, self._clock(), 0)
        if previous is not None and previous.question == question:
            answer.known, answer.checked_at = previous.known, previous.checked_at
        self._answers[pair] = answer
        if missing is not None:
            answer.checked_at = at
            self._learn(answer, ids, missing, at)

    def update(
        self, pair: Pair, ids: Iterable[str], missing: set[str] | None, at: datetime
    ) -> None:
        """What the index said at ``at`` of some ``ids`` only (those that left the top-k); None,
        it could not tell, changes nothing."""
        answer = self._answers.get(pair)
        if answer is not None and missing is not None:
            self._learn(answer, ids, missing, at)

    def view(self, pair: Pair, ids: Iterable[str]) -> IndexView:
        """What the index last said of ``ids``: those it no longer holds (with when it said so;
        None when it never told about any of them) and when it last answered about all."""
        answer = self._answers.get(pair)
        if answer is None:
            return IndexView(None, None)
        told = [(i, answer.known[i]) for i in ids if i in answer.known]
        if not told:
            return IndexView(None, answer.checked_at)
        return IndexView({i: at for i, (gone, at) in told if gone}, answer.checked_at)

    @staticmethod
    def _learn(answer: _Answers, ids: Iterable[str], missing: set[str], at: datetime) -> None:
        for i in ids:
            answer.known[i] = (i in missing, at)
