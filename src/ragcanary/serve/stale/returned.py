"""The ids each pair's recent runs returned, kept between runs for the stale-label check."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

Pair = tuple[str, str]  # (suite, target)


class ReturnedIds:
    """Per pair, the newest start of a run that returned each id, over a stale-label window.

    Stale labels are relevant ids that none of a pair's last ``stale_label_runs`` answered
    runs returned. Reading those runs' ids from storage for every run decoded window x
    canaries id lists each time (49 x 200 at the default window, for a suite of 200), in
    threads that took the interpreter from the event loop. Kept here, a run reads from
    storage only the runs of the window this process has not seen: after a start, and those
    another replica ran.
    """

    def __init__(self) -> None:
        self._runs: dict[Pair, dict[str, datetime]] = {}  # run id -> its start
        self._last: dict[Pair, dict[str, datetime]] = {}  # id -> newest start that returned it

    def unseen(self, pair: Pair, window: Sequence[tuple[str, datetime]]) -> list[str]:
        """The run ids of ``window`` (run id, start) whose ids were never added."""
        seen = self._runs.get(pair, {})
        return [run_id for run_id, _ in window if run_id not in seen]

    def add(self, pair: Pair, run_id: str, started_at: datetime, ids: Iterable[str]) -> None:
        """Remember that run ``run_id`` of ``pair``, started at ``started_at``, returned ``ids``."""
        self._runs.setdefault(pair, {})[run_id] = started_at
        last = self._last.setdefault(pair, {})
        for i in ids:
            seen = last.get(i)
            if seen is None or seen < started_at:
                last[i] = started_at

    def returned(self, pair: Pair, since: datetime) -> set[str]:
        """The ids runs of ``pair`` started at ``since`` or later returned; older ones are
        forgotten."""
        runs = self._runs.get(pair, {})
        for run_id in [r for r, at in runs.items() if at < since]:
            del runs[run_id]
        last = self._last.get(pair, {})
        for i in [i for i, at in last.items() if at < since]:
            del last[i]
        return set(last)

    def forget(self, pair: Pair) -> None:
        """Forget ``pair`` (its job was removed)."""
        self._runs.pop(pair, None)
        self._last.pop(pair, None)
