"""Personal data out of failure reports: e-mail addresses and phone numbers, in linear time.

A report's text is matched in its NFKC form, the form its dedupe key already uses, so
full-width digits and ``\\uff20``, no-break and thin spaces match as their plain forms; and with
invisible format characters (a zero-width space, a soft hyphen, a word joiner) passed over,
so ``jo\\u200b@example.com`` is an address too. Text in which nothing matches is kept as sent;
text in which something matches is kept in its NFKC form with each match replaced.

The default patterns run in time linear in the text, whatever it holds: each match attempt
starts only where a run of the characters it consumes begins and consumes possessively (no
backtracking), and an attempt at a phone number that fails has read fewer than seven digits.
The former patterns backtracked: each of a query's 2,000 digits started an attempt that read
to its end, 50 ms for one report (4 s for 20,000 characters), and one client sending such
reports held the event loop, and /readyz, for seconds. Patterns a config sets under
``candidates.redact`` run as written.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Dashes people put between groups of digits, after NFKC (which maps U+2011 to U+2010): hyphen,
# figure dash, en and em dash, horizontal bar, minus sign.
_DASHES = "\u2010-\u2015\u2212"
_PHONE_SEPARATORS = rf"[\s().\-/{_DASHES}]"

# Redacted before anything is stored, unless the config names its own patterns.
DEFAULT_REDACTIONS: tuple[tuple[str, str], ...] = (
    # An address: a local part starting where a run of its characters starts, an @ (with up
    # to three spaces either side: "jo @ example.com"), a domain of two labels or more.
    (
        r"(?<![\w.+-])[\w.+-]++[ \t]{0,3}+@[ \t]{0,3}+[\w-]++(?:\.[\w-]++)+",
        "<email>",
    ),
    # A phone number: seven digits or more in one run of digits and separators, not glued to
    # a word before it (an id like SKU12345678), with an extension (x12, ext. 12) if any.
    (
        rf"(?<![\w+(])[+(]?+\d(?:{_PHONE_SEPARATORS}*+\d){{6,}}+"
        r"(?:[ \t]*+(?i:ext(?:ension)?\.?|x)[ \t]*+\d{1,6}+)?+",
        "<phone>",
    ),
)

# Format characters that render as nothing, which a match passes over: soft hyphen, Arabic
# letter mark, Mongolian vowel separator, zero-width space, non-joiner and joiner, direction
# marks and embeddings, word joiner, invisible operators, isolates, the byte order mark.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


class Redactor:
    """Replaces each pattern's matches, in order, in a text's NFKC form (see the module)."""

    def __init__(self, patterns: Sequence[tuple[str, str]] = DEFAULT_REDACTIONS) -> None:
        self._patterns = [(re.compile(p), replacement) for p, replacement in patterns]

    def __call__(self, text: str) -> str:
        # ASCII is its own NFKC form, and holds no invisible character.
        normal = text if text.isascii() else unicodedata.normalize("NFKC", text)
        redacted = normal
        for pattern, replacement in self._patterns:
            redacted = _replace(pattern, replacement, redacted)
        return text if redacted == normal else redacted


def _replace(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    """``pattern.sub(replacement, text)`` as if ``text`` held no invisible characters; those
    outside a match stay where they were (a zero-width joiner inside an emoji sequence)."""
    if text.isascii() or not _INVISIBLE.search(text):
        return pattern.sub(replacement, text)
    gone = {match.start() for match in _INVISIBLE.finditer(text)}
    kept = [i for i in range(len(text)) if i not in gone]  # where each visible one stands
    visible = _INVISIBLE.sub("", text)
    pieces: list[str] = []
    done = 0  # in ``text``: everything before it is in ``pieces``
    for match in pattern.finditer(visible):
        start = kept[match.start()] if match.start() < len(kept) else len(text)
        end = kept[match.end() - 1] + 1 if match.end() > match.start() else start
        pieces += [text[done:start], match.expand(replacement)]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)
