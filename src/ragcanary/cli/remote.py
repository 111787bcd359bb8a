"""Reading a running daemon's API instead of the database (`--url http://DAEMON:PORT`).

For on-call engineers who can reach the daemon (``kubectl port-forward``) but hold neither the
database's credentials nor the retrievers' secrets. httpx errors are translated here.
"""

from __future__ import annotations

from typing import Any

import httpx

from ragcanary.errors import UsageError

TIMEOUT_S = 10.0


def fetch(url: str, path: str, **params: Any) -> Any:
    """The JSON the daemon at ``url`` answers for ``path``; a ``UsageError`` saying why not."""
    query = {k: v for k, v in params.items() if v is not None}
    base = url.rstrip("/")
    try:
        response = httpx.get(base + path, params=query, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise UsageError(
            f"--url {url}: cannot reach the daemon ({type(exc).__name__}: {exc}); check the "
            "address and that `ragcanary serve` runs there (kubectl port-forward ...)"
        ) from None
    try:
        body = response.json()
    except (ValueError, RecursionError):  # the decoder's own error for JSON nested too deep
        raise UsageError(
            f"--url {url}: {path} answered HTTP {response.status_code} without JSON; is this "
            "a ragcanary daemon?"
        ) from None
    if response.status_code != 200:
        detail = body.get("detail") if isinstance(body, dict) else body
        raise UsageError(f"--url {url}: {detail} (HTTP {response.status_code})")
    return body
