"""What the API checks before a handler runs: the admin or ingest token, then a capped body.

A pure ASGI middleware, so that nothing of a refused request is read or parsed: the token of
an admin route is checked on the headers alone (no body is read before it passes), a declared
``Content-Length`` over the cap is refused at once, and a body without one is read only up to
the cap. Handlers then get the body from memory.
"""

from __future__ import annotations

import base64
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1_000_000
NO_TOKEN = "admin API disabled: set RAGCANARY_ADMIN_TOKEN to enable it"
BAD_TOKEN = "missing or wrong token: send Authorization: Bearer <RAGCANARY_ADMIN_TOKEN>"


NO_INGEST = "failure reports disabled: set RAGCANARY_INGEST_TOKEN to enable them"
BAD_INGEST = "missing or wrong token: send Authorization: Bearer <RAGCANARY_INGEST_TOKEN>"


def is_admin_route(method: str, path: str) -> bool:
    """Routes that change the daemon or read what users asked: reloading the config, pinning
    baselines, recording and finishing changes, deciding judgments, and the list of failure
    reports."""
    if path.rstrip("/") == "/api/v1/candidates":
        return method != "POST"
    return method == "POST" and (
        path == "/-/reload"
        or path.startswith("/api/v1/baselines/")
        or path.rstrip("/") == "/api/v1/changes"
        or path.startswith("/api/v1/changes/")
        or path.startswith("/api/v1/judgments/")
    )


def is_ingest_route(method: str, path: str) -> bool:
    """The application's failure reports: a token of their own, which can do nothing else."""
    return method == "POST" and path.rstrip("/") == "/api/v1/candidates"


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether ``header`` is exactly ``Bearer <token>`` (the scheme in any case), timing-safe."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.encode(), token.encode())


def credentials_match(header: str | None, token: str) -> bool:
    """Whether ``header`` carries ``token``: as ``Bearer <token>``, or as the password of HTTP
    Basic credentials (any user name), which a browser asks for and sends by itself."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return bearer_matches(header, token)
    try:
        decoded = base64.b64decode(given.strip(), validate=True)
    except ValueError:
        return False
    password = decoded.partition(b":")[2]
    return hmac.compare_digest(password, token.encode())


class Guard:
    """Authenticate admin routes and cap request bodies, before the app sees the request."""

    def __init__(
        self,
        app: ASGIApp,
        admin_token: Callable[[], str | None],
        max_body: int = MAX_BODY_BYTES,
        ingest_token: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.app = app
        self.admin_token = admin_token  # read per request: a reload may change it
        self.ingest_token = ingest_token
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        for guarded, token_of, missing, wrong in (
            (is_admin_route, self.admin_token, NO_TOKEN, BAD_TOKEN),
            (is_ingest_route, self.ingest_token, NO_INGEST, BAD_INGEST),
        ):
            if not guarded(scope["method"], scope["path"]):
                continue
            token = token_of()
            if not token:
                await _answer(send, 403, missing)
                return
            if not bearer_matches(headers.get("authorization"), token):
                await _answer(send, 401, wrong, {"www-authenticate": "Bearer"})
                return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _answer(send, 413, self._too_large())
            return
        body, whole = await self._read_body(receive)
        if not whole:
            await _answer(send, 413, self._too_large())
            return
        await self.app(scope, _replay(body, receive), send)

    def _too_large(self) -> str:
        return f"request body over {self.max_body / 1_000_000:g} MB; send a smaller one"

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool]:
        """The body, read until its end or one byte past the cap (then: not whole)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), True  # the client left; the app will see it
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", False
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), True


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the client's later events."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(
    send: Send, status: int, detail: str, extra: dict[str, str] | None = None
) -> None:
    payload = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),  # the unread body must not be taken for the next request
        *((k.encode(), v.encode()) for k, v in (extra or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
