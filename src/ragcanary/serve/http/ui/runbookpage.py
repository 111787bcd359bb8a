"""The alert runbooks as pages: /ui/runbooks/ (the index) and /ui/runbooks/ALERT.

The runbooks are Markdown files shipped in the package (``serve/http/ui/runbooks/``, which
``docs/runbooks`` links to), one per alert, so every daemon serves the runbooks of its own
version and an alert's ``runbook_url`` opens on the daemon its ``ui_url`` opens.
"""

from __future__ import annotations

import functools
import re
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

from ragcanary.serve.http.ui import markdown

BASE = "/ui/runbooks/"
INDEX = "README"  # the index page's file
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


@functools.cache
def names() -> frozenset[str]:
    """The alerts that have a runbook: the Markdown files of the package, but the index."""
    folder = files("ragcanary.serve.http.ui").joinpath("runbooks")
    found = {
        entry.name.removesuffix(".md") for entry in folder.iterdir() if entry.name.endswith(".md")
    }
    return frozenset(name for name in found if _NAME.fullmatch(name) and name != INDEX)


def page(name: str | None) -> dict[str, Any] | None:
    """What the runbook page of ``name`` (None: the index) shows; None when there is none."""
    if name is not None and name not in names():
        return None  # before the cache: it holds the runbooks, not every name asked for
    return _rendered(name)


@functools.cache
def _rendered(name: str | None) -> dict[str, Any]:
    file = files("ragcanary.serve.http.ui").joinpath("runbooks", f"{name or INDEX}.md")
    text = file.read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip() if text else (name or "Runbooks")
    return {"alert": name, "title": title, "body": markdown.render(text, href)}


def href(target: str) -> str | None:
    """Where a runbook's link goes: another runbook's page, an anchor, or an http(s) address;
    None (the text alone) for a path of the repository that the daemon does not serve."""
    parts = urlsplit(target)
    if parts.scheme in ("http", "https") and parts.netloc:
        return target
    if parts.scheme or parts.netloc:
        return None  # javascript:, mailto:, //host ...: not from a runbook
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    if not parts.path:
        return fragment or None
    name = parts.path.removesuffix(".md")
    if name == INDEX:
        return BASE + fragment
    if name in names():
        return BASE + name + fragment
    return None
