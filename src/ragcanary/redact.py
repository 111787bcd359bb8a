"""Scrubbing secret values (header values, ``${VAR}`` values) out of text before anyone sees it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from urllib.parse import quote, quote_plus

MASK = "***"
# Shorter values ("a", "on", "v1") collide with ordinary words and would shred every message.
MIN_SECRET_LENGTH = 3

# JSON's short escapes; any other control character is written \u00XX.
_JSON_SHORT = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_SHORT["\t"] = "\\t"
# Besides non-ASCII, what some encoder writes as \uXXXX: Go, Gson and Rails the characters
# special in HTML; .NET those and ' " + `; JavaScript-safe encoders U+2028 and U+2029.
_JSON_MAY_ESCAPE = frozenset("<>&'+=`\u2028\u2029")
# HTML's named entities for the characters a page must or may escape.
_HTML_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}
_HTML_MAY_ESCAPE = frozenset("&<>\"'/`=")


class Redactor:
    """Replaces every occurrence of any secret with ``***``; call it on each message.

    A secret is found in every form a message may quote it in: as it is; URL-encoded (an
    HTTP library's error quotes the URL it was placed in); inside a JSON string however the
    encoder escaped it (``\\/`` for ``/``, ``\\uXXXX`` in either case for non-ASCII and for
    characters special to HTML, surrogate pairs, ``\\"``), as a target's error body echoes
    it; and HTML-escaped (``&amp;``, ``&#39;``, ``&#x2F;``), as an error page does.

    Each secret is one pattern per form, and each character of a form's pattern has
    alternatives that differ in their first two characters (the character itself, which is
    never ``\\`` in the JSON form nor ``&`` in the HTML one, or an escape): at any position
    at most one alternative can match, so matching never backtracks and stays linear in the
    text, whatever the secret holds.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = frozenset(s for s in secrets if len(s) >= MIN_SECRET_LENGTH)
        self._whole, self._pattern = _compiled(self.secrets)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def is_secret(self, text: str) -> bool:
        """Whether ``text`` is, whole, one of the secrets (or its URL-encoding).

        What a target refuses to keep as a returned id: an id that only *contains* a
        secret's characters is the target's data (``acme-doc-1`` with a tenant ``acme``).
        """
        return text in self._whole

    def including(self, secrets: Iterable[str]) -> Redactor:
        """A redactor of these secrets and ``secrets`` (one pattern: longest first across
        both, which two redactors applied in turn would not be)."""
        return Redactor(self.secrets.union(secrets))


@functools.lru_cache(maxsize=64)
def _compiled(secrets: frozenset[str]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """The forms of ``secrets`` that are one whole, and the pattern of every form.

    Cached: every run makes its targets' redactors again from the same secrets, and building
    the pattern costs milliseconds.
    """
    whole: set[str] = set()
    patterns: list[str] = []
    # Longest first: the regex takes the first alternative that matches at a position,
    # so a secret that contains another is masked whole rather than leaving a tail.
    for secret in sorted(secrets, key=lambda s: (-len(s), s)):
        # A lone surrogate (a JSON "\ud800" escape) cannot be UTF-8: encode it anyway.
        quoted = quote(secret, safe="", errors="surrogatepass")
        plus = quote_plus(secret, safe="", errors="surrogatepass")
        whole.update((secret, quoted, plus))
        # Escaped forms before the secret as it is: a JSON body's "a\\" is the secret a\
        # whole, where the secret itself would match its "a\" and leave a "\" behind.
        patterns += (_escaped(secret, _json_char), _escaped(secret, _html_char))
        patterns += map(re.escape, (secret, quoted, plus))
    unique = list(dict.fromkeys(patterns))
    return frozenset(whole), re.compile("|".join(unique)) if unique else None


def _escaped(secret: str, alternatives: Callable[[str], list[str]]) -> str:
    """The pattern of ``secret`` with each character matched by any of its ``alternatives``."""
    parts = []
    for char in secret:
        options = alternatives(char)
        parts.append(options[0] if len(options) == 1 else f"(?:{'|'.join(options)})")
    return "".join(parts)


def _json_char(char: str) -> list[str]:
    """A character inside a JSON string: ``\\"``, ``\\\\`` and control characters always
    escaped, ``/`` maybe as ``\\/``, others that some encoder escapes maybe as ``\\uXXXX``."""
    code = ord(char)
    plain = char not in _JSON_SHORT and 0x20 <= code <= 0x7E
    if plain and char != "/" and char not in _JSON_MAY_ESCAPE:
        return [re.escape(char)]
    unicode = "".join(_hex_escape(unit) for unit in _utf16(code))
    if not plain and code <= 0x7E:  # \\, \" or a control character: never as it is
        short = _JSON_SHORT.get(char)
        return [re.escape(short), unicode] if short else [unicode]
    options = [re.escape(char), unicode]
    if char == "/":
        options.append(re.escape("\\/"))
    return options


def _html_char(char: str) -> list[str]:
    """A character of an HTML page: ``&`` always as an entity, characters special to HTML
    and non-ASCII ones maybe as a named or numeric entity."""
    code = ord(char)
    if char != "&" and code <= 0x7E and char not in _HTML_MAY_ESCAPE:
        return [re.escape(char)]
    hex_digits = "".join(_any_case(d) for d in f"{code:x}")
    options = [] if char == "&" else [re.escape(char)]
    if char in _HTML_NAMED:
        options.append(re.escape(_HTML_NAMED[char]))
    options += [f"&#0*+{code};", f"&#[xX]0*+{hex_digits};"]  # leading zeros: &#038;
    return options


def _utf16(code: int) -> list[int]:
    """The UTF-16 code units JSON writes a character as (two for one beyond U+FFFF)."""
    if code <= 0xFFFF:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]


def _hex_escape(unit: int) -> str:
    """``\\uXXXX`` for one UTF-16 unit, its hex digits in either case."""
    return re.escape("\\u") + "".join(_any_case(d) for d in f"{unit:04x}")


def _any_case(digit: str) -> str:
    return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit
