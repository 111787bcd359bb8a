"""Rich renderings of reports for the terminal: the run table, regressions and worst cases."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragcanary.measure.metrics import is_judged_share
from ragcanary.measure.run_report import BaselineComparison, RunReport
from ragcanary.measure.verdict import Regression
from ragcanary.reports.report import reason_lines

_STYLE = {"ok": "bold green", "regression": "bold red", "unavailable": "bold yellow"}
_LABEL = {"ok": "PASS", "regression": "REGRESSION", "unavailable": "UNAVAILABLE"}


def _fmt(value: Any, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:+.4f}" if signed else f"{value:.4f}"
    return str(value)


def metrics_table(report: RunReport) -> Table:
    """Aggregates as a grid, one row a metric and one column a cut-off.

    With a baseline each cell also shows the delta; a drop that failed the run is red.
    """
    baseline = report.baseline
    deltas = baseline.deltas if baseline else {}
    failed = {f.metric for f in report.failures if f.kind in ("drop", "floor") and f.metric}
    rows: dict[str, dict[str, str]] = {}
    for key in report.metrics:
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
            metric = cols.get(k)
            if metric is None:
                cells.append(Text(""))
                continue
            cell = Text(_fmt(report.metrics[metric]))
            delta = deltas.get(metric)
            if baseline and delta is not None:
                cell.append(f" {_fmt(delta, signed=True)}", style="red" if delta < 0 else "dim")
            if metric in failed:
                cell.stylize("bold red")
            cells.append(cell)
        table.add_row(name, *cells)
    return table


def worst_cases(report: RunReport, limit: int = 10) -> Table | None:
    """Regressed cases, worst drop first, one row a case with its worst metric."""
    seen: dict[str, Regression] = {}
    for reg in report.regressions:
        seen.setdefault(reg.case, reg)
    if not seen:
        return None
    queries = {c.id: c.query for c in report.cases}
    table = Table(title=f"regressed cases ({len(seen)}, worst first)", title_justify="left")
    for col in ("case", "query", "metric", "baseline", "current"):
        table.add_column(col, overflow="fold")
    for case, reg in list(seen.items())[:limit]:
        table.add_row(
            case,
            queries.get(case, ""),
            reg.metric,
            _fmt(reg.baseline),
            Text(_fmt(reg.current), style="red"),
        )
    return table


def summary_line(report: RunReport) -> Text:
    outcome = report.outcome
    # Unavailable, but not for the target's fault: its answers did not fit the config.
    label = ("CONFIG ERROR", "bold red") if report.config_failure() else None
    text = Text.assemble(
        label or (_LABEL[outcome], _STYLE[outcome]),
        f"  suite {report.suite} · target {report.target} · ",
        f"coverage {report.coverage or 0.0:.0%} · {report.counts.cases} cases · ",
        f"{report.duration_s or 0.0:.2f}s",
    )
    baseline = report.baseline
    if baseline:
        text.append(
            f" · vs {baseline.run_id[:12]}: rank overlap {_fmt(baseline.rank_overlap)}, "
            f"score drift {_fmt(baseline.score_drift)}"
        )
        shift = baseline.score_shift
        if shift is not None:
            text.append(f" (shift {_fmt(shift, signed=True)})")
        text.append(_embedding_drift(baseline))
    return text


def _embedding_drift(baseline: BaselineComparison) -> str:
    """How the query vectors moved, when the target searched by vector; "" otherwise."""
    sizes = baseline.embedding_dimensions
    if sizes is not None:
        return f", embedding dimensions changed {sizes[0]} → {sizes[1]}"
    drift = baseline.embedding_drift
    if drift is None:
        return ""
    ratio = baseline.embedding_changed_ratio
    moved = f", {ratio:.0%} of query vectors moved" if ratio is not None else ""
    return f", embedding drift {_fmt(drift)}{moved}"


def render_report(report: RunReport) -> RenderableType:
    """Everything `ragcanary run` shows for one suite and target."""
    parts: list[RenderableType] = [summary_line(report)]
    if report.diagnosis is not None:  # which layer broke, before any metric
        diagnosis = report.diagnosis
        style = "dim" if diagnosis.cause == "none" else "bold"
        parts.append(Text(f"cause {diagnosis.cause}: {diagnosis.summary}", style=style))
    if report.metrics:
        parts.append(metrics_table(report))
    worst = worst_cases(report)
    if worst is not None:
        parts.append(worst)
    parts.extend(Text(f"✗ {line}", style="red") for line in reason_lines(report))
    failed = report.unanswered()
    if failed:
        reasons = ", ".join(f"{o}: {n}" for o, n in failed.items())
        parts.append(Text(f"unanswered queries: {reasons}", style="yellow"))
    return Group(*parts)


def render_diff(diff: Mapping[str, Any], limit: int = 15) -> RenderableType:
    """`ragcanary diff`: what moved between two runs, worst cases first."""
    head = Text.assemble((f"{diff['suite']} on {diff['target']}", "bold"))
    parts: list[RenderableType] = [head]
    # What the runs were made with that differs, first: it explains what follows.
    for change in diff.get("fingerprint_changes") or ():
        parts.append(Text(f"changed: {change['text']}", style="bold yellow"))
    diagnosis = diff["to"].get("diagnosis")
    if diagnosis:  # which layer broke in the newer run, before anything else
        parts.append(Text(f"cause {diagnosis['cause']}: {diagnosis['summary']}", style="bold"))
    outage = diff.get("newest_outage")
    if outage:
        parts.append(
            Text(
                f"OUTAGE: the newest run, {outage['run_id']} ({outage['started_at']}), was "
                f"unavailable (coverage {_pct(outage.get('coverage'))}"
                f"{_counts(outage.get('unanswered'))}): the target did not answer. Below: "
                "the last answered run, which predates the outage.",
                style="bold red",
            )
        )
    for label in ("from", "to"):
        parts.extend(_run_lines(label, diff[label]))
    if diff.get("outage"):
        to = diff["to"]
        parts.append(
            Text(
                f"OUTAGE: the newer run was unavailable (coverage {_pct(to.get('coverage'))}"
                f"{_counts(to.get('unanswered'))}): the target did not answer, so quality was "
                "not measured. This is not all clear: see `ragcanary runs` for the last "
                "answered run and diff --to it.",
                style="bold red",
            )
        )
        return Group(*parts)
    if diff["metrics"]:
        metrics = Table(title="aggregate changes", title_justify="left")
        for col in ("metric", "from", "to", "Δ"):
            metrics.add_column(col, justify="left" if col == "metric" else "right")
        for name, change in diff["metrics"].items():
            style = "red" if change["delta"] < 0 else "green"
            metrics.add_row(
                name,
                _fmt(change["from"]),
                _fmt(change["to"]),
                Text(points(change["delta"]), style=style),
            )
        parts.append(metrics)
    cases = Table(
        title=f"changed cases ({len(diff['cases'])}, worst first; {diff['unchanged']} "
        f"unchanged; ★ relevant{_stale_legend(diff)})",
        title_justify="left",
    )
    for col in ("case", "worst change", "left the top-k", "entered the top-k", "RBO", "top Δ"):
        cases.add_column(col, overflow="fold")
    for case in diff["cases"][:limit]:
        quality = [kv for kv in case["metrics"].items() if not is_judged_share(kv[0])]
        worst = min(quality, key=lambda kv: kv[1]["delta"], default=None)
        cases.add_row(
            case["id"],
            f"{worst[0]} {_fmt(worst[1]['from'])}→{_fmt(worst[1]['to'])}" if worst else "",
            ", ".join(_entry(e) for e in case["left"]),
            ", ".join(_entry(e) for e in case["entered"]),
            _fmt(case["rbo"]),
            _fmt(case["top_score_delta"], signed=True),
        )
    parts.append(cases)
    drift = drift_table(diff["cases"][:limit], diff.get("thresholds") or {})
    if drift is not None:
        parts.append(drift)
    if len(diff["cases"]) > limit:
        parts.append(Text(f"… and {len(diff['cases']) - limit} more (--json shows all)"))
    for label in ("added", "removed"):
        if diff[label]:
            parts.append(Text(f"cases {label}: {', '.join(diff[label])}"))
    return Group(*parts)


# How a stale label that left the top-k is marked, and what the mark means.
_STALE_MARKS = {
    "missing": ("†", "left the index"),
    "not_returned": ("‡", "no canary gets it back"),
}


def _stale_legend(diff: Mapping[str, Any]) -> str:
    """The meaning of each stale mark the table shows, in the table's title."""
    shown = {e.get("stale") for case in diff["cases"] for e in case["left"]}
    return "".join(
        f"; {mark} {text}" for kind, (mark, text) in _STALE_MARKS.items() if kind in shown
    )


def _entry(entry: Mapping[str, Any]) -> str:
    score = f" {entry['score']:.3f}" if isinstance(entry.get("score"), float) else ""
    star = "★" if entry.get("relevant") else ""
    mark, _ = _STALE_MARKS.get(str(entry.get("stale")), ("", ""))
    why = f": {entry['why']}" if entry.get("why") else ""  # why the newer run lost it
    return f"{star}{entry['id']}{mark} (#{entry['rank']}{score}){why}"


MOVES_SHOWN = 5  # score moves per case in the terminal, largest first; --json has them all


def drift_table(cases: Sequence[Mapping[str, Any]], thresholds: Mapping[str, Any]) -> Table | None:
    """Per changed case, its query vectors' cosine and its ids' score moves (before → after,
    Δ; `!` over the suite's score_drift); None when no case has either."""
    rows = [c for c in cases if c.get("score_moves") or "embedding_cosine" in c]
    if not rows:
        return None
    limit = thresholds.get("score_drift")
    flag = f"! over score_drift {limit}; " if limit is not None else ""
    table = Table(
        title=f"score and query-vector drift ({flag}--json has the exact scores)",
        title_justify="left",
    )
    vectors = any("embedding_cosine" in c for c in rows)
    for col in ("case", "query vector cos", "score moves"):
        if vectors or col != "query vector cos":
            table.add_column(col, overflow="fold")
    for case in rows:
        moves = list(case.get("score_moves") or ())
        shown = [_move(m) for m in moves[:MOVES_SHOWN]]
        if len(moves) > MOVES_SHOWN:
            shown.append(Text(f"+{len(moves) - MOVES_SHOWN} more"))
        cosine = [_cosine(case)] if vectors else []
        table.add_row(case["id"], *cosine, Text(", ").join(shown))
    return table


def _move(move: Mapping[str, Any]) -> Text:
    """``doc-2 0.8100→0.7000 -0.1100!``: an id's score in the two runs and how far it moved."""
    text = f"{move['id']} {_fmt(move['from'])}→{_fmt(move['to'])} {_delta(move['delta'])}"
    return Text(text + "!", style="red") if move.get("drifted") else Text(text)


def _delta(value: Any) -> str:
    """A move to 4 decimals, or in scientific notation when smaller: never shown as 0."""
    if isinstance(value, float) and value != 0 and abs(value) < 5e-5:
        return f"{value:+.1e}"
    return _fmt(value, signed=True)


def _cosine(case: Mapping[str, Any]) -> Text:
    if "embedding_cosine" not in case:
        return Text("-")
    value = case["embedding_cosine"]
    # None: vectors of different lengths (another model) or a zero vector.
    shown = f"{value:.6f}" if isinstance(value, float) else "none"
    return Text(f"{shown} moved", style="red") if case.get("embedding_moved") else Text(shown)


def _run_lines(label: str, run: Mapping[str, Any]) -> list[Text]:
    """One run of a diff: its id (whole, as --from/--to take it), time, verdict and reasons."""
    outcome = str(run.get("outcome"))
    style = {"ok": "green", "regression": "red", "unavailable": "yellow"}.get(outcome, "")
    lines = [
        Text.assemble(
            f"{label:>4}: {run.get('run_id')}  {run.get('started_at')}  ",
            (outcome.upper(), f"bold {style}"),
            f"  coverage {_pct(run.get('coverage'))}{_counts(run.get('unanswered'))}",
        )
    ]
    lines += [Text(f"      ✗ {reason}", style="red") for reason in run.get("reasons") or []]
    return lines


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def _counts(counts: Any) -> str:
    if not counts:
        return ""
    return " (" + ", ".join(f"{o}={n}" for o, n in counts.items()) + ")"


_VERDICT_STYLES = {
    "ok": "green",
    "regressed": "red",
    "leaked": "red",
    "missed_min_score": "red",
    "unanswered": "yellow",
}


def render_history(suite: str, case: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    """`ragcanary history`: one canary over time, oldest first."""
    table = Table(title=f"{suite} / {case}: {len(rows)} runs", title_justify="left")
    relevant = sorted({doc for row in rows for doc in row["relevant_ranks"]})
    # The run id is what `ragcanary diff --from/--to` takes, so it is shown whole. The verdict
    # is what the run made of the canary; the query outcome only whether the target answered.
    columns = ("started", "run", "target", "verdict", "query outcome", "top id", "top score")
    for col in (*columns, *relevant):
        table.add_column(col, overflow="fold")
    for row in rows:
        ranks = [row["relevant_ranks"].get(doc) for doc in relevant]
        verdict = row.get("verdict")
        table.add_row(
            str(row["started_at"]),
            row["run_id"],
            row["target"],
            Text(str(verdict or "-"), style=_VERDICT_STYLES.get(str(verdict), "")),
            Text(row["outcome"], style="" if row["outcome"] in ("ok", "empty") else "yellow"),
            row["top_id"] or "-",
            _fmt(row["top_score"]),
            *[f"#{r}" if r else Text("-", style="red") for r in ranks],
        )
    return table


def points(delta: float | None) -> str:
    """A change of a rate in percentage points: ``-5.6 pts``."""
    return "-" if delta is None else f"{delta * 100:+.1f} pts"


def render_runs(rows: Sequence[Mapping[str, Any]]) -> Table:
    """`ragcanary runs`: newest first, each id whole (what diff --from/--to take); 80 columns."""
    table = Table(box=None, pad_edge=False, title="runs, newest first", title_justify="left")
    for col in ("run", "started (UTC)", "outcome", "cov", "MRR", "Δ MRR"):
        table.add_column(col, no_wrap=col != "run", overflow="fold")
    for row in rows:
        metrics, deltas = row.get("metrics") or {}, row.get("deltas") or {}
        outcome = str(row.get("outcome"))
        style = {"ok": "green", "regression": "red", "unavailable": "yellow"}.get(outcome, "")
        table.add_row(
            str(row["run_id"]),
            str(row.get("started_at"))[5:16].replace("T", " "),
            Text(outcome, style=style),
            f"{row['coverage']:.0%}" if isinstance(row.get("coverage"), float) else "-",
            _fmt(metrics.get("mrr")),
            points(deltas.get("mrr")),
        )
    return table
