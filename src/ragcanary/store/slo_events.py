"""The SLO events of a pair's stored runs, read without rebuilding their reports (docs/slo.md).

A run's canaries refer to rankings that runs share (store/shared.py): each distinct ranking
is decoded once and judged once, however many runs answered with it, so a month of runs
costs one read of their answers' numbers and of the few rankings they name.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import select

from ragcanary.measure.report_json import unmarshal_case
from ragcanary.measure.slo import (
    ANSWERED_RUNS,
    Budget,
    GoodAnswer,
    Objective,
    RunEvents,
    budget,
    case_event,
)
from ragcanary.store.schema import answers, cases, rankings, runs
from ragcanary.store.shared import BATCH, shared_values
from ragcanary.store.storage import Store


def stored_events(
    store: Store,
    suite: str,
    target: str,
    good: GoodAnswer,
    since: datetime,
    after_key: int | None = None,
) -> dict[int, RunEvents]:
    """The events of each answered run of the pair started after ``since``, and of those
    stored after the run numbered ``after_key`` (whenever they started), by run number."""
    columns = select(runs.c.run_key, runs.c.started_at, runs.c.duration_s).where(
        runs.c.suite == suite, runs.c.target == target, runs.c.outcome.in_(ANSWERED_RUNS)
    )
    wanted = [columns.where(runs.c.started_at > since)]
    if after_key is not None:  # each on an index of its own: the start, the run number
        wanted.append(columns.where(runs.c.run_key > after_key))
    with store.reading() as conn:
        heads = {
            row.run_key: row
            for query in wanted
            for row in conn.execute(query)
            if row.run_key is not None
        }
        if not heads:
            return {}
        case_numbers = list(
            conn.execute(select(cases.c.case_key).where(cases.c.suite == suite)).scalars()
        )
        answered: dict[int, list[int]] = defaultdict(list)
        low = min(heads)
        for chunk in _chunks(case_numbers):
            query = select(answers.c.run_key, answers.c.ranking_key).where(
                answers.c.case_key.in_(chunk), answers.c.run_key >= low
            )
            for run_key, ranking in conn.execute(query):
                if run_key in heads:
                    answered[run_key].append(ranking)
        distinct = {ranking for found in answered.values() for ranking in found}
        entries = shared_values(conn, rankings, distinct)
    judged = {key: case_event(unmarshal_case(value), good) for key, value in entries.items()}
    out: dict[int, RunEvents] = {}
    for run_key, head in heads.items():
        verdicts = [judged.get(ranking) for ranking in answered.get(run_key, ())]
        finished = head.started_at + timedelta(seconds=head.duration_s or 0.0)
        out[run_key] = RunEvents(
            finished,
            sum(v is not None for v in verdicts),
            sum(v is True for v in verdicts),
        )
    return out


def _chunks(items: Sequence[int]) -> list[Sequence[int]]:
    return [items[start : start + BATCH] for start in range(0, len(items), BATCH)]


Pair = tuple[str, str]
# Besides the runs stored after the newest one known, those started this recently are read
# again: a replica's run may commit after one with a higher number.
REREAD_S = 120.0


class SloLedger:
    """Each pair's stored runs' SLO events, read once and kept: a stored run never changes.

    Every ``budgets`` call reads only the runs stored since the last one (and again those of
    the last minutes, which a replica may have committed late), and forgets what left the
    window. The daemon keeps one; a command makes one for a single reading.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[Pair, GoodAnswer, float], dict[int, RunEvents]] = {}
        self._lock = threading.Lock()  # the API's reads come from several worker threads

    def budgets(
        self, store: Store, slos: Mapping[Pair, Objective], now: datetime
    ) -> dict[Pair, Budget]:
        """The budget of each pair of ``slos`` over its window ending ``now``."""
        with self._lock:
            return self._budgets(store, slos, now)

    def _budgets(
        self, store: Store, slos: Mapping[Pair, Objective], now: datetime
    ) -> dict[Pair, Budget]:
        kept = {(pair, slo.good, slo.window_s) for pair, slo in slos.items()}
        for key in set(self._runs) - kept:
            del self._runs[key]  # a pair or SLO the config no longer has
        out: dict[Pair, Budget] = {}
        for (suite, target), slo in slos.items():
            known = self._runs.setdefault(((suite, target), slo.good, slo.window_s), {})
            start = now - timedelta(seconds=slo.window_s)
            if known:
                since = max(start, now - timedelta(seconds=REREAD_S))
                after: int | None = max(known)
            else:  # the first read: the whole window (a long run started before it)
                since, after = start - _LONGEST_RUN, None
            known.update(stored_events(store, suite, target, slo.good, since, after))
            for run_key in [k for k, r in known.items() if r.finished_at <= start]:
                del known[run_key]
            out[(suite, target)] = budget(known.values(), slo, now)
        return out


# A run is found by its start, counted by its end: look this much earlier for long runs.
_LONGEST_RUN = timedelta(hours=1)
