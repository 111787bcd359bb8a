"""The configuration model (``ragcanary.yaml``): settings, their validators and defaults."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ragcanary.config.presets import PRESET_CHECKS, check_own_fields
from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.problems import show
from ragcanary.config.schedule import DEFAULT_EVERY_S, build_trigger
from ragcanary.config.units import (
    DURATION_HINT,
    MAX_DURATION_S,
    RATE_HINT,
    DurationOutOfRange,
    format_duration,
    parse_duration,
    parse_rate,
)


def _quote(value: Any) -> str:
    """A value as a validator's message names it: scalars whole, containers by their kind.

    Not shortened like ``show`` does: a message is redacted after it is built, and a
    secret cut in half by shortening would no longer be recognised.
    """
    return show(value) if isinstance(value, dict | list) or value is None else repr(value)


def _duration(value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except DurationOutOfRange:
        seconds = math.inf  # reported below, with the longest allowed
    except ValueError:
        raise _fix(f"{_quote(value)} is not a duration", DURATION_HINT) from None
    if seconds <= 0:  # no timeout or interval of ours can be zero
        raise _fix(f"{value!r} is not a duration above 0", DURATION_HINT)
    if seconds > MAX_DURATION_S:  # timedelta and datetime arithmetic would overflow
        longest = format_duration(MAX_DURATION_S)
        raise _fix(f"{_quote(value)} is longer than {longest}", f"write {longest} or less")
    return seconds


MIN_INTERVAL_S = 1.0  # DESIGN.md "Limits on what comes in": intervals are at least 1 s


def _interval(value: Any) -> float:
    seconds = _duration(value)
    if seconds < MIN_INTERVAL_S:
        raise _fix(
            f"{_quote(value)} is shorter than {format_duration(MIN_INTERVAL_S)}",
            "write an interval of at least 1s, like 30s or 5m",
        )
    return seconds


def _rate(value: Any) -> float:
    try:
        return parse_rate(value)
    except ValueError as exc:
        scalar = isinstance(value, str | int | float)
        raise _fix(str(exc) if scalar else f"{_quote(value)} is not a rate", RATE_HINT) from None


Seconds = Annotated[float, BeforeValidator(_duration)]
Interval = Annotated[float, BeforeValidator(_interval)]
PerSecond = Annotated[float, BeforeValidator(_rate)]
Floor = Annotated[float, Field(ge=0, le=1)]
Floors = dict[Annotated[int, Field(gt=0)], Floor]  # k -> lowest acceptable value

FLOOR_METRICS = ("hit_rate", "precision", "recall", "ndcg", "map")
DEFAULT_EVERY = DEFAULT_EVERY_S
URL_EXAMPLE = "http://127.0.0.1:8088/search"
_LISTEN = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})")
_STORAGE = re.compile(r"sqlite(\+pysqlite)?://(/.*)?|postgresql\+psycopg://\S+")
_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class TargetConfig(_Strict):
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

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        try:
            parts = urlsplit(url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            valid = False
        if not valid:
            raise _fix(f"{url!r} is not an http(s) URL", f"write a full URL like {URL_EXAMPLE}")
        return url

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
        if self.preset != "pgvector" and "url" not in self.model_fields_set:
            raise _fix("required field is missing", f"add url: {URL_EXAMPLE}", "url")
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


class Thresholds(_Strict):
    """When a run fails: absolute floors per metric@k, and limits relative to the baseline.

    In YAML the floors sit beside the limits: ``hit_rate: {5: 0.8}``, ``mrr: 0.5``.
    """

    hit_rate: Floors = Field(default_factory=dict)
    precision: Floors = Field(default_factory=dict)
    recall: Floors = Field(default_factory=dict)
    ndcg: Floors = Field(default_factory=dict)
    map: Floors = Field(default_factory=dict)
    mrr: Floor | None = None
    max_drop: float = Field(default=0.02, ge=0)
    # 0.03, not 0.05: a shift of 0.05 under score jitter of sd 0.01 leaves only about half the
    # pairs over 0.05, and the alert wants over half (docs/performance.md, detection quality).
    score_drift: float = Field(default=0.03, ge=0)
    min_rank_overlap: float | None = Field(default=0.7, ge=0, le=1)
    significance: float = Field(default=0.05, gt=0, lt=1)
    # 1 - mean cosine of the query vectors with the baseline's over which RagCanaryEmbeddingDrift
    # fires: the same model gives under 0.001, another model or version far more.
    embedding_drift: float = Field(default=0.01, ge=0, le=2)

    def floors(self) -> dict[str, float]:
        """The absolute floors keyed like report metrics: ``{"hit_rate@5": 0.8, "mrr": 0.5}``."""
        out = {
            f"{metric}@{k}": floor
            for metric in FLOOR_METRICS
            for k, floor in sorted(getattr(self, metric).items())
        }
        if self.mrr is not None:
            out["mrr"] = self.mrr
        return out


class SuiteConfig(_Strict):
    """One suite: which cases, against which targets, how often, and what counts as failing."""

    cases: str
    targets: list[str] = Field(min_length=1)
    every: Interval | None = None  # every 5m when neither it nor cron is set
    cron: str | None = None
    k: list[int] = Field(default_factory=lambda: [1, 3, 5, 10])
    depth: int = Field(default=10, ge=1, validate_default=True)
    baseline: Literal["pinned", "previous"] = "pinned"
    min_coverage: float = Field(default=0.9, ge=0, le=1)
    gain: Literal["linear", "exponential"] = "linear"
    thresholds: Thresholds = Field(default_factory=Thresholds)
    per_case_metrics: bool = False
    # A relevant id no canary got back in this many answered runs is a stale label.
    stale_label_runs: int = Field(default=50, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _default_schedule(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("every") is None and data.get("cron") is None:
            return {**data, "every": DEFAULT_EVERY}
        return data

    @field_validator("thresholds", mode="before")
    @classmethod
    def _no_thresholds(cls, value: Any) -> Any:
        return {} if value is None else value  # a bare "thresholds:" means the defaults

    @field_validator("cron")
    @classmethod
    def _cron(cls, cron: str | None, info: ValidationInfo) -> str | None:
        if cron is None:
            return None
        # every is validated first and only defaulted when cron is absent, so set means written.
        if info.data.get("every") is not None:
            raise _fix("every and cron are both set", "keep only one of them")
        try:
            build_trigger(None, cron)  # the very trigger serve schedules
        except ValueError as exc:
            raise _fix(
                f"{cron!r} is not a cron expression ({exc})",
                'write five fields (minute hour day month weekday), like "*/5 * * * *"',
            ) from None
        return cron

    @field_validator("k")
    @classmethod
    def _cutoffs(cls, k: list[int]) -> list[int]:
        if not k:
            raise _fix("no cut-offs", "list the k to report, like [1, 5, 10]")
        for index, value in enumerate(k):
            if value < 1:
                raise _fix(f"{value} is not a cut-off", "use whole numbers of 1 or more", index)
        # Each once; a cut-off written twice is reported by the loader (_check_suites), which
        # keeps this check from hiding the floors' and depth's own checks against k.
        return sorted(set(k))

    @field_validator("depth")
    @classmethod
    def _deep_enough(cls, depth: int, info: ValidationInfo) -> int:
        k = info.data.get("k")
        if k and depth < max(k):
            raise _fix(
                f"depth {depth} is less than the largest k ({max(k)})",
                f"set depth: {max(k)} or more (results asked for per query)",
            )
        return depth

    @field_validator("thresholds")
    @classmethod
    def _floors_at_reported_k(cls, thresholds: Thresholds, info: ValidationInfo) -> Thresholds:
        k = info.data.get("k")
        if not k:
            return thresholds
        errors = [
            InitErrorDetails(
                type=_fix(
                    f"{metric}@{cutoff} is never computed: {cutoff} is not in k",
                    f"add {cutoff} to k, or use one of {', '.join(map(str, k))}",
                ),
                loc=(metric, cutoff),
                input=floor,
            )
            for metric in FLOOR_METRICS
            for cutoff, floor in getattr(thresholds, metric).items()
            if cutoff not in k
        ]
        if errors:  # every one of them, not only the first
            raise ValidationError.from_exception_data("Thresholds", errors)
        return thresholds


class EmbeddingConfig(_Strict):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint that turns canary queries into vectors."""

    url: str
    model: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    dimensions: int | None = Field(default=None, ge=1)  # sent when set; answers must match it
    batch: int = Field(default=64, ge=1, le=2048)  # queries per request
    timeout: Seconds = 10.0
    retries: int = Field(default=1, ge=0)
    max_response_bytes: int = Field(default=50_000_000, ge=1)
    verify_tls: bool = True

    @field_validator("headers")
    @classmethod
    def _sendable(cls, headers: dict[str, str]) -> dict[str, str]:
        return sendable_headers(headers)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return TargetConfig._http_url(url)


class Redaction(_Strict):
    """A pattern whose matches are replaced in failure reports before they are stored."""

    pattern: str
    replace: str = "<redacted>"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _fix(
                f"{pattern!r} is not a regular expression ({exc})", "fix the pattern"
            ) from None
        return pattern


class CandidatesConfig(_Strict):
    """Failure reports of the application (``POST /api/v1/candidates``) and their bounds."""

    max_pending: int = Field(default=10_000, ge=1)  # past it the oldest pending are dropped
    rate_limit: PerSecond = 20.0  # reports a second from one source (or client address)
    burst: int = Field(default=50, ge=1)
    # Replaced before anything is stored; None: e-mail addresses and phone numbers.
    redact: list[Redaction] | None = None


class Config(_Strict):
    """The whole ``ragcanary.yaml``."""

    storage: str = "sqlite:///ragcanary.db"
    listen: str = "127.0.0.1:9464"
    # Where people reach the web pages (/ui/) from outside, e.g. behind a proxy: the daemon
    # cannot know it, and links from alerts, dashboards and logs need it.
    ui_url: str | None = None
    log_level: str = "info"
    log_format: Literal["json", "console"] | None = None
    admin_token: str | None = None
    ingest_token: str | None = None  # what the application sends to POST /api/v1/candidates
    candidates: CandidatesConfig = Field(default_factory=CandidatesConfig)
    retention: Seconds = 30 * 86400.0  # runs older than this are pruned...
    retention_failed: Seconds = 90 * 86400.0  # ...except regressed and unavailable ones
    embeddings: dict[str, EmbeddingConfig] = Field(default_factory=dict)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    suites: dict[str, SuiteConfig] = Field(default_factory=dict)

    @field_validator("embeddings", "targets", "suites", mode="before")
    @classmethod
    def _none_yet(cls, value: Any) -> Any:
        return {} if value is None else value  # a bare "targets:" while a config is drafted

    @field_validator("storage")
    @classmethod
    def _sqlalchemy_url(cls, storage: str) -> str:
        if not _STORAGE.fullmatch(storage):
            shown = _hide_password(storage)
            raise _fix(
                f"{shown!r} is not a supported storage URL",
                "write sqlite:///path/to/ragcanary.db or postgresql+psycopg://user@host/db",
            )
        return storage

    @field_validator("listen", mode="before")
    @classmethod
    def _host_port(cls, listen: Any) -> Any:
        # Before type checks, so that a bare port (read by YAML as a number) gets this fix too.
        match = _LISTEN.fullmatch(listen) if isinstance(listen, str) else None
        if not match or not 1 <= int(match.group(2)) <= 65535:
            raise _fix(
                f"{_quote(listen)} is not host:port",
                "write it like 127.0.0.1:9464 or 0.0.0.0:9464",
            )
        return listen

    @field_validator("ui_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise _fix(
                f"{url!r} is not an http(s) base URL",
                "write the address people open, like https://ragcanary.example.com",
            )
        return url.rstrip("/")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, level: str) -> str:
        if level.lower() not in _LOG_LEVELS:
            raise _fix(f"{level!r} is not a log level", f"write one of {', '.join(_LOG_LEVELS)}")
        return level.lower()


def mentions_query(template: Any, placeholder: str = "{query}") -> bool:
    """Whether a body or params template sends ``placeholder`` somewhere."""
    if isinstance(template, str):
        return placeholder in template
    if isinstance(template, Mapping):
        return any(mentions_query(v, placeholder) for v in template.values())
    if isinstance(template, list):
        return any(mentions_query(v, placeholder) for v in template)
    return False


def password_of(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _hide_password(url: str) -> str:
    password = password_of(url)
    return url.replace(f":{password}@", ":***@", 1) if password else url
