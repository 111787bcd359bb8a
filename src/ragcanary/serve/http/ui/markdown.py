"""A small Markdown renderer for the runbooks: the subset they are written in, every text escaped.

Headings (with GitHub's anchors), paragraphs, bullet and numbered lists, fenced code, tables,
and inline code, bold, emphasis and links. Anything else shows as the text it is. No HTML in
the source is passed through, and a link becomes one only when ``link`` gives it an address:
a page never gets a ``javascript:`` link or a tag from a file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator

from markupsafe import Markup, escape

Link = Callable[[str], str | None]  # a link's target as written -> its href, or None: text only

_HEADING = re.compile(r"(#{1,4})\s+(.+?)\s*#*\s*")
_ITEM = re.compile(r"(\s*)([-*+]|\d+[.)])\s+(.*)")
_TABLE_RULE = re.compile(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*")
_INLINE = re.compile(r"`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\)")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EMPHASIS = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")


def slug(text: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return kept.replace(" ", "-")


def render(text: str, link: Link) -> Markup:
    """``text`` (Markdown) as HTML, every piece of it escaped."""
    return Markup("\n").join(_blocks(text.splitlines(), link))


def inline(text: str, link: Link) -> Markup:
    """One line's code spans, links, bold and emphasis; the rest escaped."""
    out: list[Markup] = []
    at = 0
    for match in _INLINE.finditer(text):
        out.append(_emphasis(text[at : match.start()]))
        code, label, target = match.groups()
        if code is not None:
            out.append(Markup("<code>{}</code>").format(code))
        else:
            href = link(target)
            shown = inline(label, link)
            out.append(shown if href is None else Markup('<a href="{}">{}</a>').format(href, shown))
        at = match.end()
    out.append(_emphasis(text[at:]))
    return Markup("").join(out)


def _emphasis(text: str) -> Markup:
    escaped = str(escape(text))  # * survives escaping, so the markers are found after it
    escaped = _STRONG.sub(r"<strong>\1</strong>", escaped)
    return Markup(_EMPHASIS.sub(r"<em>\1</em>", escaped))


def _blocks(lines: list[str], link: Link) -> Iterator[Markup]:
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.lstrip().startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
            stop = len(lines) if end is None else end
            code = "\n".join(lines[i + 1 : stop])
            yield Markup("<pre><code>{}</code></pre>").format(code)
            i = stop + 1
        elif heading := _HEADING.fullmatch(line):
            level, title = len(heading.group(1)), heading.group(2)
            yield Markup('<h{0} id="{1}">{2}</h{0}>').format(
                level,
                slug(_INLINE.sub(lambda m: m.group(1) or m.group(2), title)),
                inline(title, link),
            )
            i += 1
        elif line.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.fullmatch(lines[i + 1]):
            end = next((j for j in range(i + 2, len(lines)) if not lines[j].startswith("|")), None)
            stop = len(lines) if end is None else end
            yield _table(lines[i], lines[i + 2 : stop], link)
            i = stop
        elif _ITEM.fullmatch(line):
            i = yield from _list(lines, i, link)
        else:
            end = next((j for j in range(i + 1, len(lines)) if _starts_block(lines, j)), None)
            stop = len(lines) if end is None else end
            text = " ".join(part.strip() for part in lines[i:stop])
            yield Markup("<p>{}</p>").format(inline(text, link))
            i = stop


def _starts_block(lines: list[str], i: int) -> bool:
    line = lines[i]
    return (
        not line.strip()
        or line.lstrip().startswith("```")
        or _HEADING.fullmatch(line) is not None
        or _ITEM.fullmatch(line) is not None
        or (
            line.startswith("|")
            and i + 1 < len(lines)
            and bool(_TABLE_RULE.fullmatch(lines[i + 1]))
        )
    )


def _list(lines: list[str], i: int, link: Link) -> Generator[Markup, None, int]:
    """One list from ``lines[i]``: its items, each with its indented continuation lines.

    A generator whose return value is where the list ends, for ``_blocks`` to go on from.
    """
    first = _ITEM.fullmatch(lines[i])
    assert first is not None
    ordered = first.group(2)[0].isdigit()
    items: list[str] = []
    while i < len(lines):
        item = _ITEM.fullmatch(lines[i])
        if item is None or item.group(2)[0].isdigit() != ordered:
            break
        parts = [item.group(3)]
        i += 1
        while i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip():
            if _ITEM.fullmatch(lines[i]) and not lines[i].startswith("    "):
                break
            parts.append(lines[i].strip())
            i += 1
        items.append(" ".join(parts))
        if i < len(lines) and not lines[i].strip():
            after = next((j for j in range(i, len(lines)) if lines[j].strip()), None)
            if after is None or _ITEM.fullmatch(lines[after]) is None:
                break
            i = after
    tag = "ol" if ordered else "ul"
    body = Markup("").join(Markup("<li>{}</li>").format(inline(item, link)) for item in items)
    yield Markup("<{0}>{1}</{0}>").format(tag, body)
    return i


def _cells(row: str) -> list[str]:
    """The cells of a table row; a ``|`` inside a code span stays in its cell."""
    cells: list[str] = []
    current: list[str] = []
    in_code = False
    for char in row.strip().removeprefix("|").removesuffix("|"):
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    cells.append("".join(current).strip())
    return cells


def _table(header: str, rows: list[str], link: Link) -> Markup:
    head = Markup("").join(
        Markup('<th scope="col">{}</th>').format(inline(cell, link)) for cell in _cells(header)
    )
    body = Markup("").join(
        Markup("<tr>{}</tr>").format(
            Markup("").join(Markup("<td>{}</td>").format(inline(c, link)) for c in _cells(row))
        )
        for row in rows
    )
    return Markup(
        '<div class="scroll" tabindex="0" role="region" aria-label="Table">'
        "<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table></div>"
    ).format(head, body)
