"""What `calibrate --power` prints: the smallest drop of each metric the verdict detects."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from ragcanary.measure.calibrate import Canaries
from ragcanary.measure.power import MOST_CANARIES, POWER, Detectable, suite_power
from ragcanary.measure.verdict import Policy

MODEL = (
    "drop model: each canary independently loses its relevant documents from the results "
    "(all its metrics 0 in the degraded run); a drop is the expected fall of the metric's "
    "aggregate. Noise: each canary's values in two distinct calibration runs."
)


def print_power(
    console: Console, calibrated: Canaries, policy: Policy, suite: str, drop: float | None
) -> None:
    """The power section of `calibrate`: one row per metric, and the model behind it."""
    found = suite_power(calibrated.canaries, policy, calibrated.exact, drop, seed=policy.seed)
    kind = "deterministic target" if calibrated.exact else "noisy target"
    console.print(
        f"power of the verdict on {suite}: {len(calibrated.canaries)} canaries, "
        f"{POWER:.0%} power at significance {policy.significance:g}, "
        f"max_drop {policy.max_drop:g}, {kind}",
        markup=False,
        highlight=False,
    )
    console.print(MODEL, markup=False, highlight=False)
    if calibrated.exact:
        console.print(
            "deterministic: no score moved between runs, so a drop over max_drop in 2 or more "
            "canaries fails the run without the test (scores of other results assumed kept)",
            markup=False,
            highlight=False,
        )
    console.print(power_table(found, policy, drop))


def power_table(found: Sequence[Detectable], policy: Policy, drop: float | None) -> Table:
    """Per metric: mean, paired noise, minimum detectable drop, share of canaries affected,
    and with ``drop`` the canaries it needs."""
    table = Table(title_justify="left")
    columns = [
        "metric",
        "mean",
        "noise (sd of paired Δ)",
        "minimum detectable drop",
        "canaries losing hits",
    ]
    if drop is not None:
        columns.append(f"canaries for a drop of {drop:g}")
    for col in columns:
        table.add_column(col, justify="left" if col == "metric" else "right")
    for d in found:
        row = [
            d.metric,
            f"{d.mean:.4f}",
            f"{d.noise:.4f}",
            "not detectable" if d.drop is None else f"{d.drop:.4f}",
            "-" if d.affected is None else f"{d.affected:.1%}",
        ]
        if drop is not None:
            row.append(_needed(d, drop, policy))
        table.add_row(*row)
    return table


def _needed(found: Detectable, drop: float, policy: Policy) -> str:
    """The canaries a drop needs, or why no number of them is enough."""
    if found.needed is not None:
        return f"{found.needed:,}"
    if drop <= policy.max_drop + 1e-12:
        return "never (not above max_drop)"
    if drop > found.mean + 1e-12:
        return "never (above the mean)"
    return f"more than {MOST_CANARIES:,}"
