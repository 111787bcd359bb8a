"""Several targets compared, as rich tables for the terminal: one row per target."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragcanary.measure.target_comparison import Figures, TargetComparison
from ragcanary.reports.comparison import cell_lines, legend, metric_groups, seconds


def render_comparison(comparison: TargetComparison) -> RenderableType:
    """The targets with coverage and latency, the suite's metric tables, then each tag's."""
    parts: list[RenderableType] = [_overview(comparison)]
    parts += _scope(comparison, None)
    for tag in comparison.tags:
        parts += _scope(comparison, tag)
    parts.append(Text(legend(comparison) + " Correction: Holm."))
    return Group(*parts)


def _overview(comparison: TargetComparison) -> Table:
    table = Table(
        title=f"{comparison.suite}: {len(comparison.targets)} targets against "
        f"{comparison.reference} (Holm-corrected)",
        title_justify="left",
    )
    for col in ("target", "coverage", "latency p50", "latency p95"):
        table.add_column(col, justify="left" if col == "target" else "right")
    for t in comparison.targets:
        table.add_row(
            _name(t.name, t.is_reference),
            f"{t.coverage:.0%}",
            seconds(t.latency_p50_s),
            seconds(t.latency_p95_s),
        )
    return table


def _scope(comparison: TargetComparison, tag: str | None) -> list[RenderableType]:
    where = "all canaries" if tag is None else f"tag {tag}"
    tables: list[RenderableType] = []
    for group in metric_groups(comparison):
        table = Table(title=f"{comparison.suite}, {where}", title_justify="left")
        table.add_column("target")
        for metric in group:
            table.add_column(metric, justify="right")
        for t in comparison.targets:
            figures = t.suite if tag is None else t.tags[tag]
            cells = [
                Text("\n".join(cell_lines(figures, m, t.is_reference)), style=_style(m, figures))
                for m in group
            ]
            table.add_row(_name(t.name, t.is_reference), *cells)
        tables.append(table)
    return tables


def _style(metric: str, figures: Figures) -> str:
    return "red" if metric in figures.significant else ""


def _name(name: str, is_reference: bool) -> str:
    return f"{name} (reference)" if is_reference else name
