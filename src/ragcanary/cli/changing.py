"""`ragcanary change start|finish|list|show`: declared changes, their maintenance windows and
their verdicts, in the database of the config or through a running daemon's API (``--url``)."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ragcanary.cli.common import ConfigOption, JsonOption, UrlOption, read_only, running
from ragcanary.errors import UsageError
from ragcanary.store.change_records import DEFAULT_WINDOW, KINDS

# The CLI's option for each field a change request names.
_OPTIONS = {"kind": "--kind", "description": "--description", "window": "--window", "max": "--max"}

UrlAdminOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Send it to a running daemon (http://HOST:PORT) with $RAGCANARY_ADMIN_TOKEN "
        "instead of writing the database.",
        show_default=False,
    ),
]


def change_start(
    kind: Annotated[str, typer.Option(help=f"What changes: {', '.join(KINDS)}.")],
    description: Annotated[str, typer.Option(help="What is changed, for whoever looks later.")],
    target: Annotated[
        list[str], typer.Option("--target", help="A target it touches (repeat for several).")
    ],
    window: Annotated[
        str, typer.Option(help="How long alerts of those targets are held (at most 24h).")
    ] = DEFAULT_WINDOW,
    allow_long: Annotated[
        bool, typer.Option("--max", help="Allow a window over 24h (up to 30d).")
    ] = False,
    config: ConfigOption = None,
    url: UrlAdminOption = None,
    as_json: JsonOption = False,
) -> None:
    """Declare a change and open its maintenance window; prints the change's id."""
    body = {
        "kind": kind,
        "description": description,
        "targets": target,
        "window": window,
        "max": allow_long,
    }
    with running():
        if url:
            from ragcanary.cli.remote import send

            shown = send(url, "/api/v1/changes", body)
        else:
            shown = _local_start(config, body)
    _print_started(shown, as_json)


def change_finish(
    change_id: Annotated[str, typer.Argument(help="The change's id (change start printed it).")],
    config: ConfigOption = None,
    url: UrlAdminOption = None,
    as_json: JsonOption = False,
) -> None:
    """End a change's maintenance window now."""
    with running():
        if url:
            from ragcanary.cli.remote import send

            shown = send(url, f"/api/v1/changes/{change_id}/finish", {})
        else:
            shown = _local(config, lambda changes, now, _: _finished(changes, change_id, now))
    if as_json:
        Console().print_json(data=shown)
    else:
        typer.echo(f"change {shown['id']} {shown['state']} at {shown['finished_at']}")


def change_list(
    config: ConfigOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 100,
) -> None:
    """List declared changes, the newest first, open or finished."""
    with running():
        if url:
            from ragcanary.cli.remote import fetch

            rows = fetch(url, "/api/v1/changes", limit=limit)["changes"]
        else:
            rows = _local(
                config, lambda changes, now, _: [c.as_dict(now) for c in changes.recent(limit)]
            )
    console = Console()
    if as_json:
        console.print_json(data=rows)
        return
    table = Table(title="changes", title_justify="left")
    for column in ("id", "kind", "targets", "state", "started", "ends", "finished", "what"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["id"],
            row["kind"],
            ", ".join(row["targets"]),
            row["state"],
            row["started_at"],
            row["ends_at"],
            row["finished_at"] or "",
            row["description"],
        )
    console.print(table if rows else Text("no change declared yet"))


def change_show(
    change_id: Annotated[str, typer.Argument(help="The change's id (change list shows them).")],
    config: ConfigOption = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a change and its verdict on each pair it touches: the first run after its window
    against the pair's last run before it."""
    with running():
        if url:
            from ragcanary.cli.remote import fetch

            shown = fetch(url, f"/api/v1/changes/{change_id}")
        else:
            shown = _local(
                config, lambda changes, now, loaded: _shown(changes, now, loaded, change_id)
            )
    if as_json:
        Console().print_json(data=shown)
        return
    _print_change(shown)


def _shown(changes: Any, now: datetime, loaded: Any, change_id: str) -> dict[str, Any]:
    """The change as ``GET /api/v1/changes/{id}`` answers it, from the config's database."""
    change = changes.get(change_id)
    if change is None:
        raise UsageError(f"no change {change_id!r}; `ragcanary change list` shows them")
    suites = loaded.config.suites
    pairs = [(suite, target) for suite, cfg in suites.items() for target in cfg.targets]
    shown: dict[str, Any] = change.as_dict(now)
    return shown | {"verdicts": [v.as_dict() for v in changes.verdicts(change, pairs, now)]}


def _print_change(shown: dict[str, Any]) -> None:
    """The change, then a line per pair: its verdict, the runs compared, why it failed."""
    ended = shown["finished_at"] or f"open until {shown['ends_at']}"
    lines = [
        f"change {shown['id']} ({shown['kind']}): {shown['description']}",
        f"targets {', '.join(shown['targets'])}; {shown['started_at']} → {ended}",
    ]
    for row in shown["verdicts"]:
        pair = f"{row['suite']} · {row['target']}"
        if row["verdict"] is None:
            waiting = shown["state"] == "open" or row["run_id"] is None
            lines.append(f"{pair}: {'pending' if waiting else 'none'}")
            continue
        before = row["before_run_id"] or "none"
        lines.append(f"{pair}: {row['verdict']} (run {row['run_id']} against {before})")
        diagnosis = row["diagnosis"]
        lines.append(f"  {diagnosis['cause']}: {diagnosis['summary']}")
        lines += [f"  {reason}" for reason in row["reasons"]]
    if not shown["verdicts"]:
        lines.append("no configured suite runs on its targets")
    typer.echo("\n".join(lines))


def _local(config: Any, work: Any) -> Any:
    """``work(ChangeStore, now, loaded)`` on the database of the config ``loaded``."""
    from ragcanary.store.changes import ChangeStore
    from ragcanary.store.storage import Store

    loaded = read_only(config)
    store = Store.from_url(loaded.config.storage)
    try:
        store.migrate()
        return work(ChangeStore(store), datetime.now(UTC), loaded)
    finally:
        store.close()


def _local_start(config: Any, body: dict[str, Any]) -> dict[str, Any]:
    from ragcanary.store.change_records import ChangeProblem, change_request
    from ragcanary.store.changes import ChangeStore
    from ragcanary.store.storage import Store

    loaded = read_only(config)
    try:
        request = change_request(body, loaded.config.targets)
    except ChangeProblem as problem:
        option = _OPTIONS.get(problem.field, "--target")
        raise UsageError(f"{option}: {problem.message}") from None
    store = Store.from_url(loaded.config.storage)
    try:
        store.migrate()
        now = datetime.now(UTC)
        change = ChangeStore(store).start(request, now)
        return {"id": change.change_id, **change.as_dict(now)}
    finally:
        store.close()


def _finished(changes: Any, change_id: str, now: datetime) -> dict[str, Any]:
    change = changes.finish(change_id, now)
    if change is None:
        raise UsageError(f"no change {change_id!r}; `ragcanary change list` shows them")
    shown: dict[str, Any] = change.as_dict(now)
    return shown


def _print_started(shown: dict[str, Any], as_json: bool) -> None:
    if as_json:
        Console().print_json(data=shown)
        return
    typer.echo(shown["id"])  # alone on stdout, for ID=$(ragcanary change start ...)
    Console(stderr=True, highlight=False).print(
        f"change {shown['id']} ({shown['kind']}) open until {shown['ends_at']} on "
        f"{', '.join(shown['targets'])}: their alerts are held, runs go on",
        markup=False,
    )
