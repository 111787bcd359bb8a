"""Tests for scrubbing secrets out of messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.redact import Redactor


@pytest.mark.parametrize(
    ("secrets", "text", "expected"),
    [
        (["s3cret"], "token s3cret rejected", "token *** rejected"),
        (["s3cret"], "s3crets3cret", "******"),
        (["abc", "abcdef"], "key abcdef", "key ***"),
        (["abcdef", "abc"], "abc and abcdef", "*** and ***"),
        (["ab"], "ab is too short to redact", "ab is too short to redact"),
        ([""], "nothing to hide", "nothing to hide"),
        ([], "nothing to hide", "nothing to hide"),
        (["a+b=c"], "literal a+b=c", "literal ***"),
        (["p@ss word"], "url ?k=p%40ss%20word", "url ?k=***"),
        (["p@ss word"], "form k=p%40ss+word", "form k=***"),
    ],
)
def test_redactor_masks_every_secret_of_three_or_more_chars(secrets, text, expected):
    """Secrets are masked longest first, literally, also URL-encoded; short ones are left alone."""
    assert Redactor(secrets)(text) == expected


_alphabet = st.characters(codec="ascii", exclude_characters="*")


@settings(max_examples=150, deadline=None)
@given(
    secrets=st.lists(st.text(_alphabet, min_size=3, max_size=8), max_size=4),
    text=st.text(_alphabet, max_size=60),
    glue=st.lists(st.integers(min_value=0, max_value=3), max_size=4),
)
def test_no_secret_survives_redaction(secrets, text, glue):
    """Whatever the text and however secrets are embedded, none can be found afterwards."""
    for i, index in enumerate(glue):
        if secrets:
            text = text[: i * 7] + secrets[index % len(secrets)] + text[i * 7 :]
    redacted = Redactor(secrets)(text)
    for secret in secrets:
        assert secret not in redacted
