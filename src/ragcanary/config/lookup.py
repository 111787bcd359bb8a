"""A generic HTTP target's ``lookup:``: the URL template that says whether the index holds an id.

The template holds ``{id}`` where the document id goes (percent-encoded, ``/`` included) and is
resolved against the target's ``url`` the way a browser resolves a link: ``/docs/{id}`` on the
same host, ``docs/{id}`` beside the search endpoint, ``https://other/docs/{id}`` as written.
Presets look ids up through their database's own API and refuse it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from ragcanary.config.problems import fix_error as _fix

if TYPE_CHECKING:
    from ragcanary.config.target import TargetConfig

ID = "{id}"
LOOKUP_EXAMPLE = "/docs/{id} (resolved against url) or https://search.internal/docs/{id}"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def resolve_lookup(url: str, template: str) -> str:
    """``template`` resolved against the target's ``url`` (RFC 3986), ``{id}`` left in place."""
    return urljoin(url, template)


def check_lookup(config: TargetConfig) -> None:
    """A template on the generic target only, with one kind of placeholder, ``{id}``, in the
    path or query of an http(s) URL without credentials of its own."""
    template = config.lookup
    if template is None:
        return
    if config.preset != "http":
        raise _fix(
            f"lookup is for the generic http target; the {config.preset} preset looks ids up "
            "through its own API",
            "remove lookup:",
            "lookup",
        )
    others = sorted({f"{{{name}}}" for name in _PLACEHOLDER.findall(template)} - {ID})
    if others:
        raise _fix(
            f"lookup fills in {ID} only; {', '.join(others)} would be sent as written",
            f"write {ID} where the document id goes",
            "lookup",
        )
    if ID not in template:
        raise _fix(
            f"lookup has no {ID}: every id would be asked at the same URL",
            f"write it like lookup: {LOOKUP_EXAMPLE}",
            "lookup",
        )
    try:
        parts = urlsplit(resolve_lookup(config.url, template))
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise _fix(
            f"lookup {template!r} is not an http(s) URL or a path",
            f"write it like lookup: {LOOKUP_EXAMPLE}",
            "lookup",
        )
    if ID in parts.netloc:
        raise _fix(
            f"lookup puts {ID} in the host; the id goes in the path or the query",
            f"write it like lookup: {LOOKUP_EXAMPLE}",
            "lookup",
        )
    if parts.username is not None or parts.password is not None:
        raise _fix(
            "lookup holds a user or password; a lookup is sent with the target's own "
            "credentials (its headers, and url's user:password@)",
            "remove user:password@ from lookup",
            "lookup",
        )
