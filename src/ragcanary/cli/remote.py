"""Reading a running daemon's API instead of the database (`--url http://DAEMON:PORT`).

For on-call engineers who can reach the daemon (``kubectl port-forward``) but hold neither the
database's credentials nor the retrievers' secrets. httpx errors are translated here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx

from ragcanary.errors import UsageError

TIMEOUT_S = 10.0


def fetch(url: str, path: str, **params: Any) -> Any:
    """The JSON the daemon at ``url`` answers for ``path``; a ``UsageError`` saying why not."""
    query = {k: v for k, v in params.items() if v is not None}
    return _asked(url, path, lambda base: httpx.get(base + path, params=query, timeout=TIMEOUT_S))


def send(url: str, path: str, body: Any) -> Any:
    """POST ``body`` as JSON to the daemon at ``url`` with the admin token
    (RAGCANARY_ADMIN_TOKEN); the JSON it answers (200 or 201), else a ``UsageError`` saying
    why not."""
    token = os.environ.get("RAGCANARY_ADMIN_TOKEN")
    if not token:
        raise UsageError(
            f"--url {url}: {path} needs the daemon's admin token; set RAGCANARY_ADMIN_TOKEN"
        )
    headers = {"Authorization": f"Bearer {token}"}
    return _asked(
        url,
        path,
        lambda base: httpx.post(base + path, json=body, headers=headers, timeout=TIMEOUT_S),
        ok=(200, 201),
    )


def _asked(
    url: str,
    path: str,
    ask: Callable[[str], httpx.Response],
    ok: tuple[int, ...] = (200,),
) -> Any:
    """The JSON of what ``ask`` gets from the daemon at ``url`` (given its base URL), when its
    status is one of ``ok``; else a ``UsageError`` saying why not."""
    try:
        response = ask(url.rstrip("/"))
    except httpx.HTTPError as exc:
        raise UsageError(
            f"--url {url}: cannot reach the daemon ({type(exc).__name__}: {exc}); check the "
            "address and that `ragcanary serve` runs there (kubectl port-forward ...)"
        ) from None
    try:
        answer = response.json()
    except (ValueError, RecursionError):  # the decoder's own error for JSON nested too deep
        raise UsageError(
            f"--url {url}: {path} answered HTTP {response.status_code} without JSON; is this "
            "a ragcanary daemon?"
        ) from None
    if response.status_code not in ok:
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        raise UsageError(f"--url {url}: {detail} (HTTP {response.status_code})")
    return answer
