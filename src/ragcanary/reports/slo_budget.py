"""The error budget of each pair's SLO as JSON rows (``GET /api/v1/slo``) and a terminal table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.slo import Budget, Objective

Pair = tuple[str, str]


def objectives(
    suites: Mapping[str, SuiteConfig], suite: str | None = None, target: str | None = None
) -> dict[Pair, Objective]:
    """The SLO of each configured pair that has one (of ``suite`` / ``target`` if given)."""
    return {
        (name, each): cfg.slo.objective_of()
        for name, cfg in suites.items()
        if cfg.slo is not None and suite in (None, name)
        for each in cfg.targets
        if target in (None, each)
    }


def budget_rows(
    budgets: Mapping[Pair, Budget], slos: Mapping[Pair, Objective]
) -> list[dict[str, Any]]:
    """One JSON object per pair, by suite then target (docs/api.md, ``GET /api/v1/slo``)."""
    return [
        {
            "suite": suite,
            "target": target,
            "objective": found.objective,
            "window_s": found.window_s,
            "good": str(slos[(suite, target)].good),
            "events": found.events,
            "good_events": found.good,
            "sli": found.sli,
            "budget_remaining": found.remaining,
            "burn_rate": dict(found.burn_rates),
        }
        for (suite, target), found in sorted(budgets.items())
    ]


def budget_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The rows of ``budget_rows`` as a table: budget left, burn rates, events."""
    windows = sorted({w for row in rows for w in row["burn_rate"]}, key=_seconds)
    table = Table(title="Quality SLOs: error budget over each window")
    for name in ("suite", "target", "objective", "good", "window", "SLI", "budget left"):
        table.add_column(name, justify="right" if name in ("objective", "SLI") else "left")
    for window in windows:
        table.add_column(f"burn {window}", justify="right")
    table.add_column("events (good)", justify="right")
    for row in rows:
        table.add_row(
            row["suite"],
            row["target"],
            f"{row['objective']:.4g}",
            row["good"],
            f"{row['window_s'] / 86400:g}d",
            _percent(row["sli"], 3),
            _percent(row["budget_remaining"], 1),
            *(_burn(row["burn_rate"].get(w)) for w in windows),
            f"{row['events']} ({row['good_events']})",
        )
    return table


def _percent(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def _burn(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _seconds(window: str) -> float:
    return float(window[:-1]) * {"m": 60, "h": 3600, "d": 86400}[window[-1]]
