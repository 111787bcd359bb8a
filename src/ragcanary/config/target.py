"""A target's settings (``targets:``): how to ask one retriever and read its answer."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from ragcanary.config.credentials import check_one_credential
from ragcanary.config.fetch import FetchConfig
from ragcanary.config.fields import PerSecond, Seconds, Strict
from ragcanary.config.lookup import check_lookup
from ragcanary.config.presets import PRESET_CHECKS, check_chroma_url, check_own_fields
from ragcanary.config.problems import fix_error as _fix

URL_EXAMPLE = "http://127.0.0.1:8088/search"
# An endpoint's name is a label value of ragcanary_endpoint_overlap and a key of the report.
ENDPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


# Presets that speak a vector database's own API, and the score direction each implies.
PRESET_SCORE_ORDER: dict[str, Literal["desc", "asc"]] = {
    "chroma": "asc",
    "elasticsearch": "desc",
    "opensearch": "desc",
    "pgvector": "asc",  # all three operators: <#> is the inner product negated
    "vespa": "desc",
    "rushdb": "desc",
}
# Weaviate's depends on the search operator: a distance for near*, a score for bm25 and hybrid.
WEAVIATE_SCORE_ORDER: dict[str, Literal["desc", "asc"]] = {
    "nearVector": "asc",
    "nearText": "asc",
    "bm25": "desc",
    "hybrid": "desc",
}


# What httpx can send: a header name is an HTTP token, a value visible ASCII, space and tab.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


def sendable_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` when HTTP can send every one; else a problem at the first that it cannot.

    The value is never shown: it is usually a secret.
    """
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise _fix(
                "a header name may hold only ASCII letters, digits and !#$%&'*+-.^_`|~",
                "rename the header (names like X-Api-Key)",
                name,
            )
        if not _HEADER_VALUE.fullmatch(value):
            at = next(i for i, c in enumerate(value) if not _HEADER_VALUE.fullmatch(c))
            raise _fix(
                f"a header value must be printable ASCII: character {at + 1} is not "
                "(a line break, a control character or a non-ASCII letter)",
                "check the value and the ${VAR} it comes from; encode non-ASCII text "
                "(percent- or base64-encoding) as the service expects",
                name,
            )
    return headers


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is not a URL a target can be asked at (http or https, with a host)."""
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    return None if valid else f"{url!r} is not an http(s) URL"


def _implied_score_order(data: Any) -> tuple[str, Literal["desc", "asc"]] | None:
    """Whose scores a target's are ("the chroma preset's") and their direction, if a preset says."""
    preset = data.get("preset") if isinstance(data, dict) else None
    if preset == "weaviate":
        search = data.get("search") or ("nearVector" if data.get("embedding") else None)
        order = WEAVIATE_SCORE_ORDER.get(search) if isinstance(search, str) else None
        return None if order is None else (f"the weaviate preset's {search}", order)
    if isinstance(preset, str) and preset in PRESET_SCORE_ORDER:
        return f"the {preset} preset's", PRESET_SCORE_ORDER[preset]
    return None


# Presets a judge's document texts do not come from a fetch: URL for (docs/judgments.md):
# every other HTTP preset has no way of its own and takes one.
_OWN_TEXTS = {
    "chroma": "the chroma preset reads a document's text from the collection itself",
    "pgvector": "the pgvector preset asks its database over SQL, not HTTP, and cannot fetch "
    "a document's text yet",
}


class TargetConfig(Strict):
    """How to ask one retriever endpoint for results and read its answer."""

    # http: any JSON API, described by body/params/results/id/score; a database's name: its
    # native query API (url is then the server's base URL).
    preset: Literal[
        "http",
        "chroma",
        "qdrant",
        "milvus",
        "pinecone",
        "elasticsearch",
        "opensearch",
        "pgvector",
        "weaviate",
        "vespa",
        "rushdb",
    ] = "http"
    # Required but for pgvector, which connects with dsn (see _preset_needs); "" when absent, so
    # that the HTTP targets keep a plain str.
    url: str = ""
    method: Literal["GET", "POST"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None  # JSON body template for POST; {query} and {k} are filled in
    params: dict[str, Any] = Field(default_factory=dict)  # query-string template
    results: str = "hits"  # JMESPath to the list of hits
    id: str = "id"  # JMESPath inside a hit
    score: str | None = "score"  # JMESPath inside a hit; None when the target gives no score
    # desc: a similarity, higher is better; asc: a distance, lower is better. The ranking is
    # always the order returned; this says which side of min_score and max_score is better.
    score_order: Literal["desc", "asc"] = "desc"
    # The name of an endpoint under embeddings: each canary query is embedded there first, and
    # "{vector}" in body or params is filled with its vector.
    embedding: str | None = None
    # The generic target: a URL template (absolute, or relative to url) that answers 200 when
    # the index holds the document {id} and 404 when it does not (config/lookup.py).
    lookup: str | None = None
    # The generic target: where a judge gets a document's text (config/judges.py); presets
    # fetch it by id through their own API.
    fetch: FetchConfig | None = None
    # Presets: the collection (an index for Elasticsearch and OpenSearch) by name, Chroma's
    # tenant and database, and the search engines' vector field (kNN) or text field (BM25).
    collection: str | None = None
    tenant: str = "default_tenant"
    database: str = "default_database"
    vector_field: str | None = None
    text_field: str | None = None
    using: str | None = None  # Qdrant, Weaviate: the named vector to search
    # Weaviate: the search operator (default nearVector with an embedding); it sets score_order.
    search: Literal["nearVector", "nearText", "bm25", "hybrid"] | None = None
    rank_profile: str | None = None  # Vespa: the rank profile (`ranking`) of the query
    query_tensor: str = "q"  # Vespa: the query tensor nearestNeighbor reads, input.query(q)
    timeout: Seconds = 5.0
    concurrency: int = Field(default=8, ge=1)
    rate_limit: PerSecond | None = None
    retries: int = Field(default=1, ge=0)
    max_response_bytes: int = Field(default=10_000_000, ge=1)
    verify_tls: bool = True
    # same-origin: follow redirects only to the same scheme, host and port; any: also to other
    # origins, with every configured header (secrets) dropped on the way.
    follow_redirects: Literal["same-origin", "any"] = "same-origin"
    # pgvector: the PostgreSQL to query (in place of url), the table (or schema.table), its id
    # and vector columns, the distance operator and an optional SQL condition (config/sql.py).
    dsn: str | None = None
    table: str | None = None
    id_column: str | None = None
    vector_column: str | None = None
    distance: Literal["cosine", "l2", "inner_product"] = "cosine"
    where: str | None = None
    # Other URLs of the same index (replicas, shards, regions) by name: each is asked the
    # canaries url answered, and its answers are compared with url's (probe/endpoints.py).
    endpoints: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        problem = http_url_problem(url)
        if problem is not None:
            raise _fix(problem, f"write a full URL like {URL_EXAMPLE}")
        return url

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, endpoints: dict[str, str]) -> dict[str, str]:
        for name, url in endpoints.items():
            if not ENDPOINT_NAME.fullmatch(name):
                raise _fix(
                    f"{name!r} cannot name an endpoint: it becomes a metric label and a report key",
                    "write up to 63 letters, digits, '_', '.' or '-', starting with a letter or "
                    "digit (like eu-west or replica-2)",
                    name,
                )
            problem = http_url_problem(url)
            if problem is not None:
                raise _fix(problem, f"write the replica's full URL like {URL_EXAMPLE}", name)
        return endpoints

    @field_validator("headers")
    @classmethod
    def _sendable(cls, headers: dict[str, str]) -> dict[str, str]:
        return sendable_headers(headers)

    @field_validator("method", mode="before")
    @classmethod
    def _upper_method(cls, method: Any) -> Any:
        return method.upper() if isinstance(method, str) else method

    @model_validator(mode="before")
    @classmethod
    def _preset_score_order(cls, data: Any) -> Any:
        """A preset knows its score direction; saying the other one is a mistake."""
        found = _implied_score_order(data)
        if found is None:
            return data
        whose, implied = found
        given = data.get("score_order", implied)
        if given != implied:
            kind = "distances" if implied == "asc" else "similarities"
            raise _fix(
                f"{whose} scores are {kind} (score_order: {implied}), not {given!r}",
                "remove score_order: the preset sets it",
            )
        return {**data, "score_order": implied}

    @model_validator(mode="after")
    def _preset_needs(self) -> TargetConfig:
        check_own_fields(self)
        check_one_credential(self.url, self.headers)
        if self.preset != "pgvector" and "url" not in self.model_fields_set:
            raise _fix("required field is missing", f"add url: {URL_EXAMPLE}", "url")
        check_lookup(self)
        if self.fetch is not None and self.preset in _OWN_TEXTS:
            raise _fix(f"fetch: {_OWN_TEXTS[self.preset]}", "remove fetch:", "fetch")
        self._endpoints_fit()
        if self.preset == "chroma":
            check_chroma_url(self.url)
        if self.preset == "http":
            return self
        if self.preset in PRESET_CHECKS:
            PRESET_CHECKS[self.preset](self)
            return self
        if self.preset in ("elasticsearch", "opensearch"):
            return self._search_engine_needs()
        if self.preset == "pinecone":
            return self  # the namespace may be the default one; no embedding: the index embeds
        missing = [
            f"{name}: {example}"
            for name, value, example in (
                ("collection", self.collection, "docs"),
                ("embedding", self.embedding, "NAME (an endpoint under embeddings:)"),
            )
            if value is None
        ]
        if missing:
            raise _fix(
                f"the {self.preset} preset needs {' and '.join(m.split(':')[0] for m in missing)}",
                "add " + ", ".join(missing),
            )
        return self

    def _endpoints_fit(self) -> None:
        """Endpoints are other URLs of an HTTP target, each as the target's url would be."""
        if not self.endpoints:
            return
        if self.preset == "pgvector":
            raise _fix(
                "the pgvector preset connects with dsn, not a URL: endpoints lists other URLs",
                "remove endpoints:; to compare two databases, define a target for each and "
                "run ragcanary compare",
                "endpoints",
            )
        for name, url in self.endpoints.items():
            if url == self.url:
                raise _fix(
                    "this is the target's own url: its answers would be compared with themselves",
                    "write another replica's URL, or remove the endpoint",
                    "endpoints",
                    name,
                )
            check_one_credential(url, self.headers, ("endpoints", name))
            if self.preset == "chroma":
                check_chroma_url(url, ("endpoints", name))

    def _search_engine_needs(self) -> TargetConfig:
        """An index, and either kNN (embedding and vector_field) or BM25 (text_field)."""
        if self.collection is None:
            raise _fix(
                f"the {self.preset} preset needs collection (the index)", "add collection: docs"
            )
        knn = self.embedding is not None
        if knn and self.vector_field is None:
            raise _fix(
                "a kNN search needs vector_field (the dense_vector field of the index)",
                "add vector_field: embedding, or remove embedding: for a BM25 search",
            )
        if not knn and self.text_field is None:
            raise _fix(
                f"the {self.preset} preset needs embedding and vector_field (kNN) "
                "or text_field (BM25)",
                "add text_field: content, or embedding: NAME and vector_field: embedding",
            )
        if knn and self.text_field is not None:
            raise _fix(
                "text_field and embedding are both set: one search, kNN or BM25",
                "remove text_field: for kNN, or embedding: for BM25",
            )
        return self
