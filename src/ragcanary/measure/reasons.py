"""A verdict's reasons as people read them: floors, one line a metric family, broken canaries.

A drop usually shows at every cut-off: one retriever change failed hit_rate, precision,
recall, ndcg and map at each k, 21 reasons in a real trial, and the floor breach and the
canaries that broke their own limits were buried among them. Every failure stays in the
verdict and the report JSON; the texts people read say each thing once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragcanary.measure.metrics import JUDGED
from ragcanary.measure.verdict import Failure, Regression

# Failures of these kinds are about one metric at one cut-off: those of a family group.
_ALSO = {"floor": "also below its floor at", "drop": "also dropped at"}
# The families a new, unlabelled document in the top-k lowers although it may be relevant:
# it counts as a miss. bpref passes unlabelled ids over, so it is not among them.
_UNJUDGED_EXPLAIN = frozenset({"hit_rate", "precision", "recall", "ndcg", "map", "mrr"})
_TIE = 1e-12


def reasons(failures: Sequence[Failure], notes: Sequence[str] = ()) -> list[str]:
    """One line per reason, in the order to read them: the floors each metric fell below,
    then the drops (one line per metric family: its worst cut-off's message, naming the other
    cut-offs that failed alike), then ``notes`` on them (``unjudged_note``), then the run's
    other failures (rank overlap, coverage), then each canary that broke its own limit.

    A family whose failures do not all carry an ``amount`` (a report written before it was
    recorded) cannot tell its worst cut-off: each of them keeps its own line.
    """
    groups: dict[tuple[str, str], list[Failure]] = {}
    run_level: list[Failure] = []
    canaries: list[Failure] = []
    for failure in failures:
        if failure.case is not None:
            canaries.append(failure)
        elif failure.kind in _ALSO and failure.metric:
            family = failure.metric.partition("@")[0]
            groups.setdefault((failure.kind, family), []).append(failure)
        else:
            run_level.append(failure)
    lines: list[str] = []
    for kind in _ALSO:
        for (of_kind, _), group in groups.items():
            if of_kind == kind:
                lines.extend(_family_lines(kind, group))
    lines.extend(notes)
    lines.extend(f.message for f in run_level)
    lines.extend(f.message for f in canaries)
    return lines


def unjudged_note(
    failures: Sequence[Failure],
    metrics: Mapping[str, float | None],
    deltas: Mapping[str, float | None],
) -> str | None:
    """A line saying that unlabelled documents may explain a failure, or None.

    Said when the run failed a drop or a floor of a metric that counts an unlabelled result
    as a miss (hit_rate, precision, recall, ndcg, map, mrr) while the share of judged ids in
    the same top-k fell from the baseline's (``deltas``): new documents entered, and nobody
    knows yet whether they are relevant. MRR, cut at ``depth``, is read with the largest k.
    Of several cut-offs the line names the one whose judged share fell most. It changes
    nothing of the verdict: the failures stand, the line only helps read them.
    """
    judged_at = {
        int(cut): name
        for name in metrics
        for family, _, cut in [name.partition("@")]
        if family == JUDGED and cut.isdigit()
    }
    involved: set[int] = set()
    kinds: set[str] = set()
    for failure in failures:
        if failure.kind not in _ALSO or failure.case is not None or not failure.metric:
            continue
        family, _, cut = failure.metric.partition("@")
        if family not in _UNJUDGED_EXPLAIN:
            continue
        if cut.isdigit():
            involved.add(int(cut))
        elif judged_at:
            involved.add(max(judged_at))
        kinds.add(failure.kind)
    fell: list[tuple[float, int, float, float]] = []
    for k in sorted(involved & judged_at.keys()):
        now, delta = metrics[judged_at[k]], deltas.get(judged_at[k])
        if now is not None and delta is not None and delta < -_TIE:
            fell.append((delta, k, now - delta, now))
    if not fell:
        return None
    _, worst, before, after = min(fell)  # the largest fall; of equal falls the smallest k
    what = "drop" if "drop" in kinds else "failure"
    return (
        f"{JUDGED}@{worst} fell from {before:.2f} to {after:.2f}: new unjudged documents may "
        f"explain part of this {what}"
    )


def _family_lines(kind: str, group: Sequence[Failure]) -> list[str]:
    amounts = [f.amount for f in group if f.amount is not None]
    if len(group) == 1 or len(amounts) < len(group):
        return [f.message for f in group]
    # The first of equal amounts is the worst: the smallest cut-off, in the verdict's order.
    worst = max(range(len(group)), key=lambda i: (amounts[i], -i))
    others = ", ".join(
        f"@{str(f.metric).partition('@')[2]}" for i, f in enumerate(group) if i != worst
    )
    return [f"{group[worst].message} ({_ALSO[kind]} {others})"]


@dataclass(frozen=True)
class FamilyDrop:
    """How one metric family dropped in one case: its worst cut-off's change, and the family's
    other cut-offs that dropped too (``"@3"``, ``"@10"``), smallest first."""

    worst: Regression
    also: tuple[str, ...] = ()

    @property
    def also_text(self) -> str:
        """`` (also dropped at @3, @10)``, or ``""`` when no other cut-off dropped."""
        return f" ({_ALSO['drop']} {', '.join(self.also)})" if self.also else ""


def family_drops(regressions: Sequence[Regression]) -> dict[str, list[FamilyDrop]]:
    """Per case, one entry per metric family that dropped, instead of one per metric and k.

    Cases and families keep the order in which ``regressions`` (worst first) names them.
    """
    by_case: dict[str, dict[str, list[Regression]]] = {}
    for regression in regressions:
        family = regression.metric.partition("@")[0]
        by_case.setdefault(regression.case, {}).setdefault(family, []).append(regression)
    return {
        case: [_family_drop(group) for group in families.values()]
        for case, families in by_case.items()
    }


def _family_drop(group: Sequence[Regression]) -> FamilyDrop:
    # The largest drop; of equal drops the smallest cut-off.
    worst = min(group, key=lambda r: (r.delta, _cut_off(r.metric)))
    others = sorted((r for r in group if r is not worst), key=lambda r: _cut_off(r.metric))
    return FamilyDrop(worst, tuple(f"@{r.metric.partition('@')[2]}" for r in others))


def _cut_off(metric: str) -> int:
    k = metric.partition("@")[2]
    return int(k) if k.isdigit() else 0
