"""On-call tables drawn where they fit on a terminal, else printed as plain, unwrapped lines."""

from __future__ import annotations

import io

import pytest
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ragcanary.reports.terminal import show

RUN_ID = "c4fcf40e97184b1f9a0e6d2c1b7a5f30"
BOX = set("│┃┏┓┗┛┡┩└┘━─")


def _table() -> Table:
    table = Table(title="core / [b]case: 2 runs")
    table.add_column("run", overflow="fold")
    table.add_column("top id", overflow="fold")
    table.add_column("score", justify="right")
    table.add_row(RUN_ID, "[bold]doc-1[/bold]", "0.9")
    table.add_row("e" * 32, "doc-22", "0.75")
    return table


def _printed(renderable: object, *, terminal: bool, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=width, color_system=None)
    show(console, renderable)  # type: ignore[arg-type]
    return out.getvalue()


def test_a_terminal_wide_enough_gets_the_drawn_table_with_ids_as_written() -> None:
    out = _printed(_table(), terminal=True, width=120)
    assert BOX & set(out)
    assert RUN_ID in out
    assert "[bold]doc-1[/bold]" in out  # an id is not read as markup
    assert "core / [b]case: 2 runs" in out


@pytest.mark.parametrize(("terminal", "width"), [(True, 40), (False, 80), (False, 500)])
def test_a_narrow_terminal_or_a_pipe_gets_one_plain_line_a_row(terminal: bool, width: int) -> None:
    lines = _printed(_table(), terminal=terminal, width=width).splitlines()
    assert lines == [
        "core / [b]case: 2 runs",
        "run                               top id              score",
        f"{RUN_ID}  [bold]doc-1[/bold]    0.9",
        f"{'e' * 32}  doc-22               0.75",
    ]


def test_texts_beside_a_table_are_printed_whole_on_their_line() -> None:
    line = Text(f"from: {RUN_ID}  2026-11-28T13:52:24.976611+00:00  OK  coverage 100%")
    out = _printed(Group(line, _table()), terminal=False, width=40)
    assert out.splitlines()[0] == line.plain
    assert not BOX & set(out)


def test_a_cell_of_several_lines_stays_on_its_row() -> None:
    table = Table()
    table.add_column("case")
    table.add_column("query")
    table.add_row("c1", "first line\nsecond line")
    assert _printed(table, terminal=False, width=80).splitlines() == [
        "case  query",
        "c1    first line second line",
    ]
