"""Importing aiohttp without the two TLS contexts it builds, as it is imported, for its defaults.

aiohttp's connector module builds a verifying and a non-verifying context at import time, for
requests that bring none of their own, and each loads the system's CA file: 490M instructions,
an eighth of a 1,000-canary ``ragcanary run`` and 150 ms of its start. The probe never uses
them: ``Transport`` gives every request that speaks TLS its own context, which trusts what
httpx trusts (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else certifi's bundle).

So while aiohttp is first imported, a default context is a verifying client context with no
certificate loaded. Were aiohttp's defaults ever used, their TLS connections would fail
verification: none would go unverified. The swap lasts only for that import, made before the
daemon starts any thread; if aiohttp is already imported, nothing is swapped.
"""

from __future__ import annotations

import ssl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def no_default_tls_contexts() -> Iterator[None]:
    """Import aiohttp inside this block to skip loading CA files for its default contexts."""
    if "aiohttp" in sys.modules:
        yield
        return
    create, load = ssl.create_default_context, ssl.SSLContext.set_default_verify_paths

    def empty_context(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        if args or kwargs:  # not aiohttp's call: what it asks for is built as always
            return create(*args, **kwargs)
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies; trusts no certificate

    def load_nothing(self: ssl.SSLContext) -> None:
        """The non-verifying context's CA load, which it never reads."""

    ssl.create_default_context = empty_context
    ssl.SSLContext.set_default_verify_paths = load_nothing  # type: ignore[method-assign]
    try:
        yield
    finally:
        ssl.create_default_context = create
        ssl.SSLContext.set_default_verify_paths = load  # type: ignore[method-assign]
