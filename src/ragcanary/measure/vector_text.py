"""A query vector as a report keeps it: base64 of little-endian float32.

Like the ``encoding_format: base64`` of OpenAI's embeddings API. Embedding models compute in
float32, so nothing they return is lost; the text is a fifth of the JSON number list's.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Sequence


def encode_vector(vector: Sequence[float]) -> str:
    """The text of ``vector``; ``decode_vector`` gives it back."""
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_vector(text: object) -> tuple[float, ...] | None:
    """The vector ``encode_vector`` wrote, or None for anything else (a hand-edited report)."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) % 4:
        return None
    packed = array("f")
    packed.frombytes(raw)
    if sys.byteorder == "big":
        packed.byteswap()
    return tuple(packed)
