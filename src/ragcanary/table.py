"""Rich renderings of reports for the terminal: the run table, regressions and worst cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

_STYLE = {"ok": "bold green", "regression": "bold red", "unavailable": "bold yellow"}
_LABEL = {"ok": "PASS", "regression": "REGRESSION", "unavailable": "UNAVAILABLE"}


def _fmt(value: Any, signed: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:+.4f}" if signed else f"{value:.4f}"
    return str(value)


def metrics_table(report: Mapping[str, Any]) -> Table:
    """Aggregates as a grid, one row a metric and one column a cut-off.

    With a baseline each cell also shows the delta; a drop that failed the run is red.
    """
    baseline = report.get("baseline") or {}
    deltas = baseline.get("deltas", {})
    failed = {f["metric"] for f in report.get("failures", []) if f.get("kind") in ("drop", "floor")}
    rows: dict[str, dict[str, str]] = {}
    for key in report["metrics"]:
        name, _, k = key.partition("@")
        rows.setdefault(name, {})[k] = key
    ks = sorted({k for cols in rows.values() for k in cols if k}, key=int)
    table = Table(title="metrics" + (" (Δ vs baseline)" if baseline else ""), title_justify="left")
    # Metrics without a cut-off (mrr) get a last, unnamed column.
    columns = ks + ([""] if any("" in cols for cols in rows.values()) else [])
    table.add_column("metric")
    for k in columns:
        table.add_column(f"@{k}" if k else "", justify="right")
    for name, cols in rows.items():
        cells: list[Text] = []
        for k in columns:
            key = cols.get(k)
            if key is None:
                cells.append(Text(""))
                continue
            cell = Text(_fmt(report["metrics"][key]))
            delta = deltas.get(key)
            if baseline and delta is not None:
                cell.append(f" {_fmt(delta, signed=True)}", style="red" if delta < 0 else "dim")
            if key in failed:
                cell.stylize("bold red")
            cells.append(cell)
        table.add_row(name, *cells)
    return table


def worst_cases(report: Mapping[str, Any], limit: int = 10) -> Table | None:
    """Regressed cases, worst drop first, one row a case with its worst metric."""
    seen: dict[str, Mapping[str, Any]] = {}
    for reg in report.get("regressions", []):
        seen.setdefault(reg["case"], reg)
    if not seen:
        return None
    queries = {c["id"]: c["query"] for c in report["cases"]}
    table = Table(title=f"regressed cases ({len(seen)}, worst first)", title_justify="left")
    for col in ("case", "query", "metric", "baseline", "current"):
        table.add_column(col, overflow="fold")
    for case, reg in list(seen.items())[:limit]:
        table.add_row(
            case,
            queries.get(case, ""),
            reg["metric"],
            _fmt(reg["baseline"]),
            Text(_fmt(reg["current"]), style="red"),
        )
    return table


def summary_line(report: Mapping[str, Any]) -> Text:
    outcome = report["outcome"]
    text = Text.assemble(
        (_LABEL[outcome], _STYLE[outcome]),
        f"  suite {report['suite']} · target {report['target']} · ",
        f"coverage {report['coverage']:.0%} · {report['counts']['cases']} cases · ",
        f"{report['duration_s']:.2f}s",
    )
    baseline = report.get("baseline")
    if baseline:
        text.append(
            f" · vs {baseline['run_id'][:12]}: rank overlap {_fmt(baseline['rank_overlap'])}, "
            f"score drift {_fmt(baseline['score_drift'])}"
        )
    return text


def render_report(report: Mapping[str, Any]) -> RenderableType:
    """Everything `ragcanary run` shows for one suite and target."""
    parts: list[RenderableType] = [summary_line(report)]
    if report["metrics"]:
        parts.append(metrics_table(report))
    worst = worst_cases(report)
    if worst is not None:
        parts.append(worst)
    parts.extend(_failure_lines(report["failures"]))
    failed = {
        o: n for o, n in report["counts"]["outcomes"].items() if n and o not in ("ok", "empty")
    }
    if failed:
        reasons = ", ".join(f"{o}: {n}" for o, n in failed.items())
        parts.append(Text(f"unanswered queries: {reasons}", style="yellow"))
    return Group(*parts)


def _failure_lines(failures: Sequence[Mapping[str, Any]]) -> list[Text]:
    return [Text(f"✗ {f['message']}", style="red") for f in failures]
