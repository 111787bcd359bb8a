"""Scrubbing secret values (header values, ``${VAR}`` values) out of text before anyone sees it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

MASK = "***"
# Shorter values ("a", "on", "v1") collide with ordinary words and would shred every message.
MIN_SECRET_LENGTH = 3


class Redactor:
    """Replaces every occurrence of any secret with ``***``; call it on each message.

    A secret is also redacted in its URL-encoded forms, because error texts from
    HTTP libraries may quote the URL a secret was placed in.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        variants: set[str] = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_LENGTH:
                # A lone surrogate (a JSON "\ud800" escape) cannot be UTF-8: encode it anyway.
                quoted = quote(secret, safe="", errors="surrogatepass")
                variants.update(
                    (secret, quoted, quote_plus(secret, safe="", errors="surrogatepass"))
                )
        # Longest first: the regex takes the first alternative that matches at a position,
        # so a secret that contains another is masked whole rather than leaving a tail.
        ordered = sorted(variants, key=lambda s: (-len(s), s))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)
