"""A generic target's ``fetch:``: where a judge gets the text of a document, by its id."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from pydantic import Field, field_validator

from ragcanary.config.fields import Strict
from ragcanary.config.problems import fix_error as _fix

ID = "{id}"
FETCH_EXAMPLE = "http://search.internal/docs/{id}"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class FetchConfig(Strict):
    """How a generic target gets a document's text: GET ``url`` with the id in place of
    ``{id}``, and the text at the JMESPath ``text`` of the JSON answer."""

    url: str
    text: str = Field(default="text", min_length=1)

    @field_validator("url")
    @classmethod
    def _template(cls, url: str) -> str:
        others = sorted({f"{{{name}}}" for name in _PLACEHOLDER.findall(url)} - {ID})
        if others:
            raise _fix(
                f"fetch fills in {ID} only; {', '.join(others)} would be sent as written",
                f"write {ID} where the document id goes, like {FETCH_EXAMPLE}",
            )
        if ID not in url:
            raise _fix(
                f"fetch has no {ID}: every document would be fetched from the same URL",
                f"write it like {FETCH_EXAMPLE}",
            )
        try:
            parts = urlsplit(url.replace(ID, "x"))
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            valid = False
        if not valid or ID in url.split("//", 1)[-1].split("/", 1)[0]:
            raise _fix(
                f"{url!r} is not an http(s) URL with {ID} in its path or query",
                f"write a full URL like {FETCH_EXAMPLE}",
            )
        return url


def fetch_url(template: str, doc_id: str) -> str:
    """``template`` with ``doc_id`` percent-encoded whole in place of ``{id}``."""
    return template.replace(ID, quote(doc_id, safe=""))
