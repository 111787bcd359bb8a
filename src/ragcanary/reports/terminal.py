"""Printing on-call views: drawn tables on a terminal wide enough, else plain unwrapped lines.

A rich table squeezed into fewer columns than it needs folds its cells, and a run id folded
over four lines can be neither copied into ``diff --from`` nor found with ``grep``. A pipe is
80 columns to rich, so every log and ``| grep`` got the folded ids. So a table is drawn only
on a terminal where it fits whole; anywhere else each row is one plain line, its cells padded
to their column, whatever the length of the line.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

GAP = "  "  # between the cells of a plain line
UNLIMITED = 1_000_000  # columns: wider than any table


def show(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` (a table, a text or a group of them) on ``console``: drawn when the
    console is a terminal on which every table in it fits, else as plain lines.

    Nothing is read as markup: an id like ``[b]x`` is printed as it is written.
    """
    parts = list(_flatten(renderable))
    for part in parts:
        if isinstance(part, Table) and isinstance(part.title, str):
            part.title = Text(part.title)
    if console.is_terminal and all(_fits(console, part) for part in parts):
        console.print(renderable, markup=False, highlight=False)
        return
    for part in parts:
        lines = plain_lines(part) if isinstance(part, Table) else [part]
        for line in lines:
            # soft_wrap: the line goes out whole; a terminal may wrap it, never cut an id.
            console.print(line, soft_wrap=True, markup=False, highlight=False)


def plain_lines(table: Table) -> list[Text]:
    """``table`` as text lines: its title, its header, then one line per row, cells padded to
    their column's widest and right-aligned where the column is, trailing spaces cut."""
    columns = [
        [_text(column.header, "bold"), *map(_text, column.cells)] for column in table.columns
    ]
    widths = [max((cell.cell_len for cell in cells), default=0) for cells in columns]
    lines = [_text(table.title)] if table.title else []
    for row in range(1 + table.row_count):
        line = Text()
        for index, (column, cells) in enumerate(zip(table.columns, columns, strict=True)):
            cell = cells[row].copy() if row < len(cells) else Text()
            if index:
                line.append(GAP)
            _pad(cell, widths[index], column)
            line.append_text(cell)
        line.rstrip()
        lines.append(line)
    return lines


def _pad(cell: Text, width: int, column: Column) -> None:
    space = width - cell.cell_len
    if column.justify == "right":
        cell.pad_left(space)
    else:
        cell.pad_right(space)


def _text(part: object, style: str = "") -> Text:
    """A cell, title or line as one line of text; a string is taken literally, not as markup."""
    if isinstance(part, Text):
        text = part.copy()
    else:
        text = Text("" if part is None else str(part), style=style)
    # One line per row: a cell's own line breaks become spaces.
    return Text(" ").join(text.split("\n")) if "\n" in text.plain else text


def _flatten(renderable: RenderableType) -> Iterator[RenderableType]:
    if isinstance(renderable, Group):
        for part in renderable.renderables:
            yield from _flatten(part)
    else:
        yield renderable


def _fits(console: Console, part: RenderableType) -> bool:
    """Whether ``part`` prints on ``console`` without a cell folded: a table at its natural
    width fits; a text wraps at its spaces, which keeps every id whole."""
    if not isinstance(part, Table):
        return True
    # Measured without a limit: Measurement.get clamps what it answers to the width it is given.
    unlimited = console.options.update(max_width=UNLIMITED)
    return Measurement.get(console, unlimited, part).maximum <= console.width
