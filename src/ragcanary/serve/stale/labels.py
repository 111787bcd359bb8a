"""Each run's stale labels: relevant ids no recent run of its pair returned, or its index lost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.measure.run_report import IndexLookup, StaleLabelEntry
from ragcanary.measure.stale import left_top_k, relevant_ids, stale_labels
from ragcanary.serve.stale.index_checks import IndexChecks
from ragcanary.serve.stale.returned import ReturnedIds
from ragcanary.store.keeper import RunKeeper
from ragcanary.suites.loaded import LoadedConfig

log = structlog.get_logger("ragcanary")

Pair = tuple[str, str]  # (suite, target)
# Which of the ids the index of the pair's target no longer holds; None when it cannot tell.
Lookup = Callable[[Pair, list[str]], Awaitable[set[str] | None]]


@dataclass(frozen=True)
class Found:
    """A run's stale labels (the report's ``stale_labels``; None: it cannot tell) and when the
    index was looked at (its ``index_lookup``)."""

    labels: tuple[StaleLabelEntry, ...] | None
    lookup: IndexLookup


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
        self,
        loaded: LoadedConfig,
        pair: Pair,
        run: RunResult,
        baseline: RunResult | None,
        evidence: IndexEvidence | None = None,
    ) -> Found:
        """The relevant ids the baseline run got back and no canary got back over the suite's
        last ``stale_label_runs`` answered runs, ``run`` included (``reason: not_returned``),
        and those the target's index no longer holds (``missing``, at once, with
        ``looked_up_at``); ``labels`` is None when neither can be told: fewer runs or no
        baseline (or no storage), and no index lookup.

        An id the target never returned is a canary it fails, not a label that went stale: a
        hard canary of a healthy retriever must not open a ticket. ``evidence`` is what the
        index said in this run of the ids that left (``probe.evidence``): taken as is, not
        asked twice.
        """
        window = loaded.config.suites[pair[0]].stale_label_runs
        left = left_top_k(run, baseline)
        index, lookup = await self._index(loaded, pair, left, evidence)
        returned = None
        if baseline is not None:
            returned = await self._returned(pair, run, window)
        if returned is None and index is None:
            return Found(None, lookup)
        alive_once = {i for r in baseline.results for i in r.answer.ids} if baseline else set()
        gone = index or {}
        stale = stale_labels(loaded.suites[pair[0]].cases, returned, set(gone))
        labels = []
        for label in stale:
            looked_up_at = None
            if label.reason == "missing":  # gone for certain, as the index said at that time
                looked_up_at = gone[label.id].isoformat()
            elif label.id not in alive_once:
                continue
            labels.append(StaleLabelEntry(label.case, label.id, label.reason, looked_up_at))
        return Found(tuple(labels), lookup)

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

    async def _index(
        self,
        loaded: LoadedConfig,
        pair: Pair,
        left: list[str],
        evidence: IndexEvidence | None = None,
    ) -> tuple[dict[str, datetime] | None, IndexLookup]:
        """The suite's relevant ids the target's index no longer holds, with when it said so
        (None: it never could tell), and the report's ``index_lookup``: when the index last
        answered about every relevant id (at most once per ``stale_label_runs`` runs or an
        hour, ``IndexChecks``) and, asked in this run, about the ids in ``left``."""
        ids = relevant_ids(loaded.suites[pair[0]].cases)
        question = (tuple(ids), loaded.config.targets[pair[1]])
        runs = loaded.config.suites[pair[0]].stale_label_runs
        checks = self.index_checks
        left_at = None
        missing: set[str] | None
        if checks.due(pair, question, runs):
            at = checks.now()
            missing = await self._ask(pair, ids)
            checks.remember(pair, question, ids, missing, at)
            left_at = at if missing is not None and left else None
        elif left:
            if evidence is not None and evidence.at is not None:  # asked in this run already
                at = evidence.at
                missing = set(evidence.gone) if evidence.gone is not None else None
            else:
                at = checks.now()
                missing = await self._ask(pair, left)
            checks.update(pair, left, missing, at)
            left_at = at if missing is not None else None
        view = checks.view(pair, ids)
        lookup = IndexLookup(_iso(view.checked_at), len(ids), tuple(left), _iso(left_at))
        return view.missing, lookup

    async def _ask(self, pair: Pair, ids: list[str]) -> set[str] | None:
        """Which of ``ids`` the index no longer holds; None when it cannot tell."""
        try:
            return await self._lookup(pair, ids)
        except Exception:  # the run is stored whatever the lookup did
            log.exception("index lookup failed", suite=pair[0], target=pair[1])
            return None


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
