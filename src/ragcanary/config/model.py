"""The configuration model (``ragcanary.yaml``): settings, their validators and defaults.

A target's settings are in ``config/target.py``; the units every section's fields are
written in, in ``config/fields.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ragcanary.config.credentials import check_one_credential
from ragcanary.config.fields import (
    Floor,
    Floors,
    HostPattern,
    Interval,
    PerSecond,
    Proxies,
    Seconds,
    Strict,
    quote_value,
)
from ragcanary.config.judges import JudgeConfig
from ragcanary.config.problems import fix_error as _fix
from ragcanary.config.schedule import DEFAULT_EVERY_S, build_trigger
from ragcanary.config.slo import SloConfig
from ragcanary.config.target import TargetConfig, sendable_headers

FLOOR_METRICS = ("hit_rate", "precision", "recall", "ndcg", "map", "judged")
DEFAULT_EVERY = DEFAULT_EVERY_S
_LISTEN = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})")
_STORAGE = re.compile(r"sqlite(\+pysqlite)?://(/.*)?|postgresql\+psycopg://\S+")
_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class Thresholds(Strict):
    """When a run fails: absolute floors per metric@k, and limits relative to the baseline.

    In YAML the floors sit beside the limits: ``hit_rate: {5: 0.8}``, ``mrr: 0.5``,
    ``bpref: 0.5``, ``judged: {10: 0.5}``.
    """

    hit_rate: Floors = Field(default_factory=dict)
    precision: Floors = Field(default_factory=dict)
    recall: Floors = Field(default_factory=dict)
    ndcg: Floors = Field(default_factory=dict)
    map: Floors = Field(default_factory=dict)
    # Judged@k: the share of the top-k that carries a label; a floor asks for labelling work.
    judged: Floors = Field(default_factory=dict)
    mrr: Floor | None = None
    bpref: Floor | None = None
    max_drop: float = Field(default=0.02, ge=0)
    # 0.03, not 0.05: a shift of 0.05 under score jitter of sd 0.01 leaves only about half the
    # pairs over 0.05, and the alert wants over half (docs/performance.md, detection quality).
    score_drift: float = Field(default=0.03, ge=0)
    min_rank_overlap: float | None = Field(default=0.7, ge=0, le=1)
    significance: float = Field(default=0.05, gt=0, lt=1)
    # 1 - mean cosine of the query vectors with the baseline's over which RagCanaryEmbeddingDrift
    # fires: the same model gives under 0.001, another model or version far more.
    embedding_drift: float = Field(default=0.01, ge=0, le=2)
    # Judged relevant ids that the target's index no longer holds (asked in the run, for the
    # ids that left their canary's top-k) from which the run fails; 0 turns the check off.
    lost_documents: int = Field(default=1, ge=0)

    def floors(self) -> dict[str, float]:
        """The absolute floors keyed like report metrics: ``{"hit_rate@5": 0.8, "mrr": 0.5}``."""
        out = {
            f"{metric}@{k}": floor
            for metric in FLOOR_METRICS
            for k, floor in sorted(getattr(self, metric).items())
        }
        for name in ("mrr", "bpref"):
            floor = getattr(self, name)
            if floor is not None:
                out[name] = floor
        return out


class SuiteConfig(Strict):
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
    # The judge (a name under judges:) that grades unlabelled ids entering a canary's top-k.
    judge: str | None = None
    # The suite's quality SLO (docs/slo.md); None: no SLO counters, rules or budget.
    slo: SloConfig | None = None

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

    @field_validator("slo")
    @classmethod
    def _good_at_reported_k(cls, slo: SloConfig | None, info: ValidationInfo) -> SloConfig | None:
        k = info.data.get("k")
        cutoff = slo.answer().k if slo is not None else None
        if k and cutoff is not None and cutoff not in k:
            raise _fix(
                f"{slo.answer().metric if slo else ''} is never computed: {cutoff} is not in k",
                f"add {cutoff} to k, or use one of {', '.join(map(str, k))}",
                "good",
            )
        return slo


class EmbeddingConfig(Strict):
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

    @model_validator(mode="after")
    def _one_credential(self) -> EmbeddingConfig:
        check_one_credential(self.url, self.headers)
        return self


class Redaction(Strict):
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


class CandidatesConfig(Strict):
    """Failure reports of the application (``POST /api/v1/candidates``) and their bounds."""

    max_pending: int = Field(default=10_000, ge=1)  # past it the oldest pending are dropped
    rate_limit: PerSecond = 20.0  # reports a second from one client address
    burst: int = Field(default=50, ge=1)
    # Replaced before anything is stored; None: e-mail addresses and phone numbers.
    redact: list[Redaction] | None = None


class Config(Strict):
    """The whole ``ragcanary.yaml``."""

    storage: str = "sqlite:///ragcanary.db"
    listen: str = "127.0.0.1:9464"
    # Where people reach the web pages (/ui/) from outside, e.g. behind a proxy: the daemon
    # cannot know it, and links from alerts, dashboards and logs need it.
    ui_url: str | None = None
    # Where alerts link their runbooks (RUNBOOK_BASE_URL/ALERT) instead of the daemon's own
    # /ui/runbooks/ at ui_url: a wiki, say.
    runbook_base_url: str | None = None
    # Host names the API and pages answer besides localhost, the listen address and ui_url's
    # host, so that a web page of another site cannot read them through DNS rebinding.
    allowed_hosts: list[HostPattern] = Field(default_factory=list)
    log_level: str = "info"
    log_format: Literal["json", "console"] | None = None
    admin_token: str | None = None
    ingest_token: str | None = None  # what the application sends to POST /api/v1/candidates
    # Peers (addresses, networks, or *) whose X-Forwarded-For names the client that the
    # failure reports' rate limit counts; from any other peer the header is ignored.
    forwarded_allow_ips: Proxies = Field(default_factory=list)
    candidates: CandidatesConfig = Field(default_factory=CandidatesConfig)
    retention: Seconds = 30 * 86400.0  # runs older than this are pruned...
    retention_failed: Seconds = 90 * 86400.0  # ...except regressed and unavailable ones
    embeddings: dict[str, EmbeddingConfig] = Field(default_factory=dict)
    judges: dict[str, JudgeConfig] = Field(default_factory=dict)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    suites: dict[str, SuiteConfig] = Field(default_factory=dict)

    @field_validator("embeddings", "judges", "targets", "suites", mode="before")
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
                f"{quote_value(listen)} is not host:port",
                "write it like 127.0.0.1:9464 or 0.0.0.0:9464",
            )
        return listen

    @field_validator("ui_url", "runbook_base_url")
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
