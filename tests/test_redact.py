"""Tests for scrubbing secrets out of messages."""

from __future__ import annotations

import html
import json
import re
import time

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


# --- escaped forms: what a JSON or HTML error body echoes a secret as --------------------------


@pytest.mark.parametrize(
    ("secret", "body", "expected"),
    [
        # PHP's json_encode escapes "/" (and non-ASCII) by default.
        ("sk/live+Zm9v/bar==", r'{"error":"token sk\/live+Zm9v\/bar== refused"}', "token *** "),
        # Python's json.dumps and PHP write non-ASCII as \uXXXX, lower-case hex...
        ("p\u00e4ssw\u00f6rd-1", r'{"error":"bad p\u00e4ssw\u00f6rd-1"}', "bad ***"),
        # ...Jackson and .NET upper-case.
        ("p\u00e4ssw\u00f6rd-1", r'{"error":"bad p\u00E4ssw\u00F6rd-1"}', "bad ***"),
        # PHP's default: both at once.
        ("\u00e4/b/c", r'{"e":"\u00e4\/b\/c"}', '"***"'),
        # A character outside the BMP is a surrogate pair.
        ("key-\U0001f511-x", r'{"e":"key-\ud83d\udd11-x"}', '"***"'),
        # Go's encoding/json writes <, > and & as \u003c, \u003e, \u0026.
        ("a<b>&c", r'{"e":"a\u003cb\u003e\u0026c"}', '"***"'),
        # .NET's System.Text.Json also escapes ', + and ", upper-case.
        ('it\'s+"q"', r'{"e":"it\u0027s\u002B\u0022q\u0022"}', '"***"'),
        # The escapes every JSON encoder writes: \" and \\.
        ('say "hi"\\now', r'{"e":"say \"hi\"\\now"}', '"***"'),
        # An HTML page quotes it with entities.
        ("a&b<c>'d\"", "<p>token a&amp;b&lt;c&gt;&#x27;d&quot; refused</p>", "token *** "),
        ("a&b<c>'d\"", "<p>token a&amp;b&lt;c&gt;&#39;d&#34; refused</p>", "token *** "),
    ],
)
def test_a_secret_escaped_in_a_json_or_html_body_is_masked(secret, body, expected):
    """The forms JSON encoders and HTML pages write a secret in are masked like the secret."""
    assert expected in Redactor([secret])(body)


_escapable = st.text(
    st.sampled_from("ab/+<>&'\"\\ \u00e4\u00df\u20ac\U0001f511\u2028\t"), min_size=3, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(
    secret=_escapable,
    ensure_ascii=st.booleans(),
    slashes=st.booleans(),
    upper=st.booleans(),
)
def test_no_json_encoding_of_a_secret_survives(secret, ensure_ascii, slashes, upper):
    """However an encoder escapes it, the body decoded after redaction holds no secret."""
    body = json.dumps({"error": f"bad token {secret} here"}, ensure_ascii=ensure_ascii)
    if slashes:
        body = body.replace("/", "\\/")
    if upper:  # hex digits of \uXXXX upper-cased, as Jackson and .NET write them
        body = re.sub(r"\\u[0-9a-f]{4}", lambda m: "\\u" + m.group(0)[2:].upper(), body)
    redacted = Redactor([secret])(body)
    assert secret not in json.loads(redacted)["error"]


@settings(max_examples=100, deadline=None)
@given(secret=_escapable)
def test_no_html_escaping_of_a_secret_survives(secret):
    page = f"<p>bad token {html.escape(secret)} here</p>"
    assert html.escape(secret) not in Redactor([secret])(page)


def test_redacting_stays_linear_for_a_secret_that_could_make_a_regex_backtrack():
    """A secret of backslashes, ampersands and percent signs against a body full of them."""
    secret = "\\&%" * 20 + "x"
    body = "\\\\&amp;%25\\&%" * 20_000
    started = time.perf_counter()
    assert Redactor([secret])(body) == body
    assert time.perf_counter() - started < 2.0  # milliseconds when linear; never ends if not


@pytest.mark.parametrize(
    ("secrets", "text", "expected"),
    [
        (["acme"], "acme", True),
        (["acme"], "acme-doc-1", False),
        (["acme"], "ACME", False),
        (["acme", "tok-9"], "tok-9", True),
        (["p@ss word"], "p%40ss%20word", True),
        (["ab"], "ab", False),  # too short to be treated as a secret
        ([], "anything", False),
    ],
)
def test_holds_a_secret_whole_only_for_a_text_that_is_one(secrets, text, expected):
    """What lets a target refuse an id that is a secret, and keep one that contains it."""
    assert Redactor(secrets).is_secret(text) is expected
