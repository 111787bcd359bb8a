"""A URL's ``user:password@``: sent as HTTP Basic, taken off the URL, and kept secret.

aiohttp refuses a URL with credentials beside an ``Authorization`` header, and httpx adds
that header itself from such a URL: every query failed as ``connect_error``. So a target's or
embedding endpoint's credentials leave the URL before any request is built, as the header
they stand for, which is a configured header like any other (dropped on a cross-origin
redirect, its value a secret).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from ragcanary.config.problems import fix_error

AUTHORIZATION = "Authorization"


def url_credentials(url: str) -> tuple[str, str] | None:
    """The user and password a URL carries before its host, percent-decoded; None if none."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return None
    if not user and not password:
        return None
    return unquote(user or ""), unquote(password or "")


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@`` (an empty ``@`` too)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def basic_token(user: str, password: str) -> str:
    """What follows ``Basic`` in the header: base64 of ``user:password`` in UTF-8, as httpx and
    curl send it."""
    # surrogatepass: a ${VAR} may hold a lone surrogate (a JSON "\ud800" escape in YAML).
    pair = f"{user}:{password}".encode("utf-8", "surrogatepass")
    return base64.b64encode(pair).decode("ascii")


def as_basic_auth(url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``url`` without its credentials, and ``headers`` with the ``Authorization: Basic`` they
    make; both as given when the URL has none. A configured Authorization (which the config
    model refuses beside URL credentials) would win."""
    credentials = url_credentials(url)
    if credentials is None or any(name.lower() == AUTHORIZATION.lower() for name in headers):
        return without_credentials(url), dict(headers)
    basic = {AUTHORIZATION: f"Basic {basic_token(*credentials)}"}
    return without_credentials(url), {**basic, **headers}


def credential_secrets(url: str) -> list[str]:
    """What of a URL's credentials must never be shown: the password as written and as sent
    (percent-decoded), and the Basic token made of it (the user name is no secret)."""
    credentials = url_credentials(url)
    if credentials is None:
        return []
    user, password = credentials
    try:
        written = urlsplit(url).password or ""
    except ValueError:
        written = ""
    return [s for s in (written, password, basic_token(user, password)) if s]


def check_one_credential(
    url: str, headers: Mapping[str, str], at: tuple[str, ...] = ("url",)
) -> None:
    """Refuse ``user:password@`` in the URL beside an Authorization header (located ``at``)."""
    if url_credentials(url) is None:
        return
    for name in headers:
        if name.lower() == AUTHORIZATION.lower():
            raise fix_error(
                f"the URL carries user:password, which is sent as Authorization: Basic, and "
                f"headers sets {name} too; a request takes one",
                "remove user:password@ from the URL, or the Authorization header",
                *at,
            )
