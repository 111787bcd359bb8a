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


def send(url: str, path: str, body: Any, token: str | None) -> Any:
    """POST ``body`` as JSON to the daemon at ``url`` with the admin ``token``; the JSON it
    answers (200 or 201), else a ``UsageError`` saying why not."""
    if not token:
        raise UsageError(
            f"--url {url}: {path} needs the daemon's admin token; set RAGCANARY_ADMIN_TOKEN"
        )
    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        response = httpx.post(base + path, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise UsageError(
            f"--url {url}: cannot reach the daemon ({type(exc).__name__}: {exc}); check the "
            "address and that `ragcanary serve` runs there (kubectl port-forward ...)"
        ) from None
    try:
        answer = response.json()
    except (ValueError, RecursionError):
        raise UsageError(
            f"--url {url}: {path} answered HTTP {response.status_code} without JSON; is this "
            "a ragcanary daemon?"
        ) from None
    if response.status_code not in (200, 201):
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        raise UsageError(f"--url {url}: {detail} (HTTP {response.status_code})")
    return answer
