"""Each run's stale labels: relevant ids no recent run of its pair returned, or its index lost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from ragcanary.measure.results import RunResult
from ragcanary.measure.stale import relevant_ids, stale_labels
from ragcanary.serve.index_checks import IndexChecks
from ragcanary.serve.returned import ReturnedIds
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

log = structlog.get_logger("ragcanary")

Pair = tuple[str, str]  # (suite, target)
# Which of the ids the index of the pair's target no longer holds; None when it cannot tell.
Lookup = Callable[[Pair, list[str]], Awaitable[set[str] | None]]


class StaleLabels:
    """Finds a run's stale labels; keeps what recent runs returned and the index's answers."""

    def __init__(
        self, keeper: RunKeeper, lookup: Lookup, index_checks: IndexChecks | None = None
    ) -> None:
        self._keeper = keeper
        self._lookup = lookup
        self.index_checks = index_checks or IndexChecks()  # when each index was last asked
        self.returned = ReturnedIds()  # what recent runs returned

    async def find(
        self, loaded: LoadedConfig, pair: Pair, run: RunResult, baseline: RunResult | None
    ) -> list[dict[str, str]] | None:
        """The relevant ids the baseline run got back and no canary got back over the suite's
        last ``stale_label_runs`` answered runs, ``run`` included (``reason: not_returned``),
        and those the target's index no longer holds (``missing``, at once); None when
        neither can be told: fewer runs or no baseline (or no storage), and no index lookup.

        An id the target never returned is a canary it fails, not a label that went stale: a
        hard canary of a healthy retriever must not open a ticket.
        """
        window = loaded.config.suites[pair[0]].stale_label_runs
        missing = await self._left_the_index(loaded, pair)
        returned = None
        if baseline is not None:
            returned = await self._returned(pair, run, window)
        if returned is None and missing is None:
            return None
        alive_once = {i for r in baseline.results for i in r.answer.ids} if baseline else set()
        stale = stale_labels(loaded.suites[pair[0]].cases, returned, missing or set())
        return [
            {"case": lb.case, "id": lb.id, "reason": lb.reason}
            for lb in stale
            if lb.reason == "missing" or lb.id in alive_once
        ]

    def forget(self, pair: Pair) -> None:
        """Forget what ``pair``'s runs returned (its job was removed)."""
        self.returned.forget(pair)

    async def _returned(self, pair: Pair, run: RunResult, window: int) -> set[str] | None:
        """The ids ``run`` and the pair's ``window - 1`` answered runs before it returned;
        None when there are fewer such runs or storage cannot tell."""
        store = self._keeper.store
        earlier = await self._keeper.call(store.answered_runs, *pair, window - 1)
        if earlier is None:
            return None
        unseen = self.returned.unseen(pair, earlier)
        if unseen:
            fetched = await self._keeper.call(store.returned_by, pair[0], unseen)
            if fetched is None:
                return None
            starts = dict(earlier)
            for run_id in unseen:
                self.returned.add(pair, run_id, starts[run_id], fetched.get(run_id, ()))
        ids = (i for r in run.results for i in r.answer.ids)
        self.returned.add(pair, run.run_id, run.started_at, ids)
        since = min((at for _, at in earlier), default=run.started_at)
        returned = self.returned.returned(pair, min(since, run.started_at))
        return returned if len(earlier) >= window - 1 else None

    async def _left_the_index(self, loaded: LoadedConfig, pair: Pair) -> frozenset[str] | None:
        """The suite's relevant ids the target's index no longer holds; None when it cannot
        tell. Asked at most once per ``stale_label_runs`` runs or an hour (``IndexChecks``)."""
        ids = relevant_ids(loaded.suites[pair[0]].cases)
        question = (tuple(ids), loaded.config.targets[pair[1]])
        runs = loaded.config.suites[pair[0]].stale_label_runs
        if not self.index_checks.due(pair, question, runs):
            return self.index_checks.last(pair)
        missing = None
        try:
            missing = await self._lookup(pair, ids)
        except Exception:  # the run is stored whatever the lookup did
            log.exception("index lookup failed", suite=pair[0], target=pair[1])
        self.index_checks.remember(pair, question, missing)
        return self.index_checks.last(pair)
