"""`ragcanary change start|finish|list`: declared changes and their maintenance windows,
in the database of the config or through a running daemon's API (``--url``)."""

# No ``from __future__ import annotations`` here: typer reads every command's parameters on
# every invocation, and evaluating them from strings each time cost 30 ms of each command.

import os
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

            shown = send(url, "/api/v1/changes", body, _token())
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

            shown = send(url, f"/api/v1/changes/{change_id}/finish", {}, _token())
        else:
            shown = _local(config, lambda changes, now: _finished(changes, change_id, now))
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
                config, lambda changes, now: [c.as_dict(now) for c in changes.recent(limit)]
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


def _token() -> str | None:
    return os.environ.get("RAGCANARY_ADMIN_TOKEN")


def _local(config: Any, work: Any) -> Any:
    """``work(ChangeStore, now)`` on the database of the config."""
    from ragcanary.store.changes import ChangeStore
    from ragcanary.store.storage import Store

    loaded = read_only(config)
    store = Store.from_url(loaded.config.storage)
    try:
        store.migrate()
        return work(ChangeStore(store), datetime.now(UTC))
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
