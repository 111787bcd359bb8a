"""What the commands that read stored runs do: baselines, diff, history, runs, export, and
the store's footprint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ragcanary.errors import UsageError
from ragcanary.suites.loaded import LoadedConfig

if TYPE_CHECKING:
    from ragcanary.store.footprint import Footprint
    from ragcanary.store.storage import Store


def _store(loaded: LoadedConfig) -> Store:
    from ragcanary.store.storage import Store

    store = Store.from_url(loaded.config.storage)
    store.migrate()
    return store


def accept_baseline(loaded: LoadedConfig, suite: str, target: str, run_id: str | None) -> str:
    """`ragcanary baseline accept`: pin ``run_id`` (or the run a unique prefix of its id
    names), by default the latest successful run."""
    from ragcanary.store.errors import UnknownRun
    from ragcanary.store.run_ids import resolve_run_id

    unknown = (
        f"--run {run_id}: no run of suite {suite!r} on target {target!r}; pick one from "
        f"`ragcanary runs --suite {suite} --target {target}`"
    )
    store = _store(loaded)
    try:
        if run_id is None:
            latest = store.latest_run(suite, target, outcome="ok")
            if latest is None:
                raise UsageError(
                    f"no successful run of suite {suite!r} on target {target!r} stored yet; "
                    "let the daemon run once or pass --run"
                )
            run_id = str(latest["run_id"])
        else:
            try:
                run_id = resolve_run_id(store, run_id)
            except UnknownRun:
                raise UsageError(unknown) from None
        report = store.get_report(run_id)
        if report is None or report.pair != (suite, target):
            raise UsageError(unknown)
        store.set_baseline(suite, target, run_id)
        return run_id
    finally:
        store.close()


def accept_after_change(loaded: LoadedConfig, suite: str, target: str, change_id: str) -> str:
    """`ragcanary baseline accept --change ID`: pin the pair's first good run after the
    change's window ended, the change kept as the reason."""
    from datetime import UTC, datetime

    from ragcanary.store.changes import ChangeStore

    store = _store(loaded)
    try:
        return ChangeStore(store).accept_baseline(change_id, suite, target, datetime.now(UTC))
    finally:
        store.close()


def stored_baselines(loaded: LoadedConfig) -> list[dict[str, Any]]:
    """`ragcanary baseline show` from the database, each with what of the config changed
    since it was measured (``config_changes``)."""
    from ragcanary.reports.pinned_config import flag_baselines
    from ragcanary.store import overview

    store = _store(loaded)
    try:
        rows = store.baselines()
        heads = overview.run_heads(store, [str(r["run_id"]) for r in rows])
        return flag_baselines(loaded, rows, heads)
    finally:
        store.close()


def print_baselines(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(data=list(rows), default=str)
        return
    from ragcanary.reports.terminal import show

    table = Table(title="pinned baselines", title_justify="left")
    why = any(row.get("reason") for row in rows)
    for col in ("suite", "target", "run", "pinned at", *(("why",) if why else ()), "config since"):
        # The run id is what diff --from takes: shown whole, wrapped if need be.
        table.add_column(col, overflow="fold")
    for row in rows:
        cells = [row["suite"], row["target"], row["run_id"], str(row["set_at"])]
        table.add_row(*cells, *((row.get("reason") or "",) if why else ()), _since_pinned(row))
    show(console, table if rows else Text("no baseline pinned yet"))


def _since_pinned(row: Mapping[str, Any]) -> Text:
    """What of the config changed since the baseline was measured; "unknown" for a run older
    than fingerprints (or a daemon older than them, with --url)."""
    changes = row.get("config_changes")
    if changes is None:
        return Text("unknown", style="dim")
    if not changes:
        return Text("unchanged")
    return Text("CHANGED: " + "; ".join(c["text"] for c in changes), style="bold yellow")


def stored_diff(
    loaded: LoadedConfig, suite: str, target: str, from_run: str | None, to_run: str | None
) -> dict[str, Any]:
    """`ragcanary diff` from the database."""
    from ragcanary.reports.oncall import relevant_ids, run_diff

    store = _store(loaded)
    try:
        config = loaded.config.suites[suite]
        relevant = relevant_ids(loaded.suites[suite].cases)
        drift = config.thresholds.score_drift
        return run_diff(store, suite, target, from_run, to_run, config.depth, relevant, drift)
    finally:
        store.close()


def print_diff(diff: Mapping[str, Any], console: Console, as_json: bool) -> None:
    from ragcanary.reports.table import render_diff
    from ragcanary.reports.terminal import show

    if as_json:
        console.print_json(data=diff, default=str)
    else:
        show(console, render_diff(diff))


def stored_history(
    loaded: LoadedConfig, suite: str, case: str, target: str | None, since: str
) -> list[dict[str, Any]]:
    """`ragcanary history` from the database."""
    from datetime import timedelta

    from ragcanary.reports.oncall import case_history

    cases = loaded.suites[suite].by_id
    if case not in cases:
        raise UsageError(f"--case {case}: no such case in suite {suite!r}")
    window = timedelta(seconds=_since(since))
    store = _store(loaded)
    try:
        return case_history(store, suite, cases[case], target, window)
    finally:
        store.close()


def print_history(
    suite: str, case: str, rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool
) -> None:
    from ragcanary.reports.table import render_history
    from ragcanary.reports.terminal import show

    if as_json:
        console.print_json(data=list(rows), default=str)
    else:
        show(console, render_history(suite, case, rows))


def stored_runs(
    loaded: LoadedConfig,
    *,
    suite: str | None,
    target: str | None,
    outcome: str | None,
    since: str,
    limit: int,
) -> list[dict[str, Any]]:
    """`ragcanary runs` from the database."""
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC) - timedelta(seconds=_since(since))
    store = _store(loaded)
    try:
        return store.list_runs(suite, target, limit, outcome, start)
    finally:
        store.close()


def export_trec(loaded: LoadedConfig, run_id: str) -> dict[str, str]:
    """`ragcanary export RUN --format trec`: file name -> text, the qrels second."""
    from ragcanary.reports.trec import qrels_file, run_file
    from ragcanary.store.run_ids import resolve_run_id

    store = _store(loaded)
    try:
        run_id = resolve_run_id(store, run_id)  # or a unique prefix of it, as `run` prints
        report = store.get_report(run_id)
    finally:
        store.close()
    if report is None:
        raise UsageError(f"run {run_id}: no such run in storage; pick one from `ragcanary runs`")
    suite = loaded.suites.get(report.suite)
    if suite is None:
        raise UsageError(
            f"run {run_id} is of suite {report.suite!r}, which the config no longer has; "
            "its labels are needed for the qrels"
        )
    try:
        return {
            f"{run_id}.run": run_file(report),
            f"{report.suite}.qrels": qrels_file(suite.cases),
        }
    except ValueError as exc:
        raise UsageError(f"cannot export run {run_id}: {exc}") from None


def print_runs(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    from ragcanary.reports.table import render_runs
    from ragcanary.reports.terminal import show

    if as_json:
        console.print_json(data=list(rows), default=str)
    else:
        show(console, render_runs(rows) if rows else Text("no run in that window"))


def stored_footprint(loaded: LoadedConfig) -> Footprint:
    """`ragcanary storage stats`: the store as it is; nothing is created, upgraded or written."""
    from ragcanary.store.footprint import footprint
    from ragcanary.store.storage import Store

    store = Store.from_url(loaded.config.storage)
    try:
        return footprint(store)
    finally:
        store.close()


def footprint_json(found: Footprint) -> dict[str, Any]:
    """`ragcanary storage stats --json`: the footprint as one object."""
    return {
        "storage": found.location,
        "backend": found.backend,
        "runs": found.runs,
        "rankings": found.rankings,
        "answers": found.answers,
        "cases": found.cases,
        "oldest_started_at": found.oldest.isoformat() if found.oldest else None,
        "newest_started_at": found.newest.isoformat() if found.newest else None,
        "table_bytes": dict(found.tables) if found.tables is not None else None,
        "database_bytes": found.database_bytes,
        "total_bytes": found.total_bytes,
        "bytes_per_answer": found.bytes_per_answer,
    }


def print_footprint(found: Footprint, console: Console, as_json: bool) -> None:
    from rich.console import Group

    from ragcanary.reports.terminal import show

    if as_json:
        console.print_json(data=footprint_json(found))
        return
    summary = Table(box=None, pad_edge=False, title=f"storage {found.location}")
    summary.add_column("what")
    summary.add_column("value", justify="right")
    per_answer = found.bytes_per_answer
    rows = [
        ("runs", f"{found.runs:,}"),
        ("oldest run started", _instant(found.oldest)),
        ("newest run started", _instant(found.newest)),
        ("canary-runs (answers)", f"{found.answers:,}"),
        ("cases answered", f"{found.cases:,}"),
        ("rankings", f"{found.rankings:,}"),
        (
            "total bytes" + (" (database and WAL)" if found.backend == "sqlite" else ""),
            _size(found.total_bytes),
        ),
        ("bytes per canary-run", "-" if per_answer is None else f"{per_answer:,.0f}"),
    ]
    if found.database_bytes is not None:
        rows.insert(-1, ("database pages", _size(found.database_bytes)))
    for row in rows:
        summary.add_row(*row)
    if found.tables is None:
        tables: Table | Text = Text(
            "bytes per table: unavailable, this SQLite was built without the dbstat table "
            "(the database pages above are all its tables and indexes, the WAL aside)"
        )
    else:
        tables = Table(box=None, pad_edge=False, title="bytes per table, with its indexes")
        tables.add_column("table")
        tables.add_column("bytes", justify="right")
        tables.add_column("share", justify="right")
        whole = sum(found.tables.values()) or 1
        for name, size in sorted(found.tables.items(), key=lambda item: (-item[1], item[0])):
            tables.add_row(name, f"{size:,}", f"{size / whole:.0%}")
    show(console, Group(summary, Text(""), tables))


def _instant(at: datetime | None) -> str:
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(size: int) -> str:
    """``size`` bytes exactly, and in the decimal unit a person reads it in."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size:,} ({size / scale:.1f} {unit})"
    return f"{size:,}"


def _since(since: str) -> float:
    from ragcanary.config.units import DURATION_HINT, DurationOutOfRange, parse_duration_between

    try:
        return parse_duration_between(since, "since")
    except DurationOutOfRange as exc:
        raise UsageError(f"--since: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"--since: {exc}; {DURATION_HINT}") from None
