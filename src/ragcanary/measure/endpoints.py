"""A target's other endpoints (replicas, shards, regions) against its url, canary by canary.

A target may list ``endpoints:``: other URLs that should answer exactly as its ``url`` does.
Each is asked the canaries the url answered (``probe.endpoints``); here each canary's answer
is compared with the url's by RBO, with the persistence the comparison with the baseline uses
(``comparison.rbo``, p = 0.9), so 1 is the same ranking and a replica that drifted apart
shows as a lower number. The url's answers alone make the run's metrics and verdict: an
endpoint that diverges, or that answers nothing at all, is reported and diagnosed, never
judged (docs/report.md, "endpoints").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from ragcanary.measure.comparison import rbo
from ragcanary.measure.results import RunResult

# Below this an endpoint's answer to a canary diverges from the url's when the suite turned
# thresholds.min_rank_overlap off: the default of that threshold.
DEFAULT_MIN_OVERLAP = 0.7


@dataclass(frozen=True)
class EndpointRun:
    """What one endpoint answered to the canaries the target's url answered."""

    name: str
    url: str  # as the report shows it: without credentials, secrets masked
    run: RunResult


@dataclass(frozen=True)
class EndpointComparison:
    """One endpoint's answers against the url's: RBO per canary both answered, and what
    it left unanswered."""

    name: str
    url: str
    asked: int  # canaries sent to it: those the url answered
    overlaps: Mapping[str, float]  # canary -> RBO with the url's answer, in suite order
    unanswered: Mapping[str, int]  # query outcome -> how many of its queries ended so
    error: str | None = None  # the first unanswered query's reason ("CASE: reason")

    @property
    def answered(self) -> int:
        return len(self.overlaps)

    @property
    def rbo_min(self) -> float | None:
        """The lowest RBO of a canary; None when it answered none."""
        return min(self.overlaps.values()) if self.overlaps else None

    @property
    def rbo_mean(self) -> float | None:
        return fmean(self.overlaps.values()) if self.overlaps else None

    def differing(self) -> tuple[str, ...]:
        """The canaries it answered otherwise than the url (RBO under 1), in suite order."""
        return tuple(case for case, overlap in self.overlaps.items() if overlap < 1.0)

    def diverged(self, min_overlap: float) -> tuple[str, ...]:
        """The canaries whose RBO with the url's answer is under ``min_overlap``."""
        return tuple(case for case, overlap in self.overlaps.items() if overlap < min_overlap)


def compare_endpoints(
    run: RunResult, endpoints: Sequence[EndpointRun]
) -> tuple[EndpointComparison, ...]:
    """Each endpoint's answers against ``run``'s (the url's), in the order given."""
    reference = {r.case.id: r.answer for r in run.results if r.answer.answered}
    compared = []
    for endpoint in endpoints:
        overlaps: dict[str, float] = {}
        unanswered: Counter[str] = Counter()
        error = None
        for result in endpoint.run.results:
            answer, case = result.answer, result.case.id
            if not answer.answered:
                unanswered[answer.outcome] += 1
                error = error or f"{case}: {answer.error or answer.outcome}"
            elif case in reference:
                overlaps[case] = rbo(reference[case].ids, answer.ids)
        compared.append(
            EndpointComparison(
                endpoint.name,
                endpoint.url,
                len(endpoint.run.results),
                overlaps,
                dict(unanswered),
                error,
            )
        )
    return tuple(compared)
