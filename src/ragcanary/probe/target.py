"""The generic HTTP target: fill a request template, ask the retriever, map its JSON to ranked ids.

Nothing a target does escapes as an exception: every timeout, reset, HTTP error
and malformed body becomes an ``Answer`` with a failure ``outcome`` and a short,
redacted ``error``. httpx errors are translated here and nowhere else, jmespath errors
here and in ``probe/templates.py``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, TypeVar

import httpx
from jmespath.exceptions import JMESPathError

from ragcanary import __version__
from ragcanary.config.credentials import as_basic_auth, credential_secrets
from ragcanary.config.lookup import resolve_lookup
from ragcanary.config.target import TargetConfig
from ragcanary.errors import ConfigError
from ragcanary.measure.fingerprint import IndexState
from ragcanary.measure.results import Answer, Outcome, PathField, PathMiss
from ragcanary.probe.documents import texts_by_url
from ragcanary.probe.responses import (
    ACCEPT_ENCODING,
    decode_json,
    describe,
    error_snippet,
    first_line,
    holding,
    kind,
    not_json,
    read_capped,
    show,
)
from ragcanary.probe.retries import (
    QueryFailed,
    Retrying,
    RetrySettings,
    retry_after,
    status_outcome,
)
from ragcanary.probe.templates import compile_path, describe_request, fill_template, target_problems
from ragcanary.probe.transport import Client, JsonPosts, close
from ragcanary.probe.url_lookup import missing_by_url
from ragcanary.redact import Redactor

MAX_REDIRECTS = 5
T = TypeVar("T")
MAX_ID_LENGTH = 512  # longer ids are no document ids, and would bloat every stored run
# An answer that the response paths do not fit is described by the keys it holds, this many
# at most, each cut to this length (enough to spot `matches` beside `took` and `status`).
MAX_KEYS_SHOWN = 20
MAX_KEY_LENGTH = 60

_Ranked = tuple[tuple[str, ...], tuple[float | None, ...]]  # ids and their scores


class Target(Protocol):
    """A retriever that answers a query with ranked ids; failures come back in the ``Answer``."""

    name: str

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The top ``k`` for ``query`` (or its ``vector``) in the target's order; never raises
        for target failures."""
        ...


def make_client(config: TargetConfig) -> httpx.AsyncClient:
    """The production client for one target: its TLS setting and our User-Agent.

    It follows no redirect itself: ``HttpTarget`` does, so that it decides which origin may
    receive the configured headers.
    """
    return http_client(config.verify_tls, config.timeout)


def http_client(verify_tls: bool, timeout: float) -> httpx.AsyncClient:
    """A client that verifies TLS as told, sends our User-Agent and follows no redirect.

    httpx's API over aiohttp's connections (``probe/transport.py``): a third of the CPU per
    query. It asks only for the encodings ``read_capped`` inflates.
    """
    return Client(
        verify=verify_tls,
        follow_redirects=False,
        timeout=timeout,
        headers={"User-Agent": f"ragcanary/{__version__}", "Accept-Encoding": ACCEPT_ENCODING},
    )


class HttpTarget:
    """A retriever behind any JSON-over-HTTP API, described by a ``TargetConfig``.

    A preset (``probe/presets/``) is a subclass: ``SHAPE`` (or ``_shape``, when it depends
    on the config) fixes what its API decides of the config (method, results, id and score
    paths), ``_setup`` reads its own settings, and
    ``_request`` (with ``_results``, the hit list of an answer) speaks its API;
    ``_error_message`` and ``AUTH_HINT`` make its refusals say what to fix; ``_missing``
    looks relevant ids up in the index (stale labels), which the generic target does only
    with a ``lookup:`` URL (``probe/url_lookup.py``).
    """

    SHAPE: ClassVar[Mapping[str, Any]] = {}
    # Added to a 401 or 403: how this API wants to be authenticated.
    AUTH_HINT: ClassVar[str] = ""

    def __init__(
        self,
        name: str,
        config: TargetConfig,
        client: httpx.AsyncClient,
        *,
        redact: Redactor | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
        jitter: Callable[[], float] = random.random,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """Compile the response paths once; raise ``ConfigError`` if one is not JMESPath.

        ``redact`` knows the config's secrets (``${VAR}`` values); the target adds its own
        headers' and URL's. ``jitter`` returns a number in [0, 1) that spreads each backoff
        over 0.5x-1.5x; ``wall_clock`` is only used to read Retry-After dates.
        """
        secrets = _secret_values(config)
        url, headers = as_basic_auth(config.url, config.headers)
        if url != config.url:  # user:password@ goes as Authorization, a configured header
            config = config.model_copy(update={"url": url, "headers": headers})
        given = config
        shape = self._shape(config)
        if shape:
            config = config.model_copy(update=dict(shape))
        problems = target_problems(name, config, file="config")
        if problems:
            raise ConfigError(problems)
        self.name = name
        self._config = config
        self._client = client
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        # Queries and look-ups alike: `retries` more after a timeout, connect error, 5xx or 429.
        self._retrying = Retrying(
            RetrySettings(config.retries), sleep=sleep, jitter=jitter, clock=clock
        )
        self._results = compile_path(config.results)
        self._id = compile_path(config.id)
        self._score = compile_path(config.score) if config.score is not None else None
        # Configured headers win, compared case-insensitively like HTTP does.
        self._headers = httpx.Headers({"Accept-Encoding": ACCEPT_ENCODING})
        self._headers.update(config.headers)
        self._posts = JsonPosts(client, config.url, self._headers)
        self._redact = (redact or Redactor(())).including(secrets)
        # The generic target's lookup URL, {id} in place; presets refuse lookup: (config/lookup.py).
        self._lookup_template = (
            None if config.lookup is None else resolve_lookup(config.url, config.lookup)
        )
        # Method, URL and body of the last request sent, for `validate --live` to show.
        self.last_request: tuple[str, str, bytes | None] | None = None
        self._setup(given)

    def describe_last_request(self) -> str:
        """The last request as `validate --live` shows it: vectors cut short, secrets masked."""
        return self._redact(describe_request(self.last_request))

    async def aclose(self) -> None:
        """Nothing to release: the client belongs to whoever passed it in."""

    async def missing(self, ids: Sequence[str]) -> set[str] | None:
        """The ids of ``ids`` the index no longer holds; None when this target cannot tell.

        Never raises: any failure is "cannot tell". A preset that can look ids up does so in
        ``_missing``; the generic target only with ``lookup:``. The canary's request stays the
        one shown.
        """
        return await self._told(self._missing(list(dict.fromkeys(ids))))

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """A preset's lookup of ``ids``; may raise ``QueryFailed``. None: cannot tell.

        The generic target GETs its ``lookup:`` URL per id, with its headers: 200 held, 404
        gone, anything else cannot tell.
        """
        if self._lookup_template is None:
            return None
        return await missing_by_url(ids, self._lookup_template, self._lookup_status)

    async def _lookup_status(self, url: str) -> int:
        """The status of ``GET url`` (a 404 is an answer), retried like a query."""
        request = self._client.build_request("GET", url, headers=self._headers)
        status, _ = await self._ask_raw(request, accept=(404,))
        return status

    async def scores(self, ids: Sequence[str], vector: Sequence[float]) -> dict[str, float] | None:
        """Each held id's exact score for ``vector``, as this target's search scores it (an id
        with several chunks: its best); ids not held are left out; None when this target
        cannot tell. Never raises, like ``missing``; the canary's request stays the one shown."""
        return await self._told(self._scores(list(dict.fromkeys(ids)), [float(x) for x in vector]))

    async def texts(self, ids: Sequence[str]) -> dict[str, str] | None:
        """Each id's document text (for a judge); ids whose text it did not find are left
        out; None when this target cannot fetch texts. Never raises, like ``missing``."""
        return await self._told(self._texts(list(dict.fromkeys(ids))))

    async def _texts(self, ids: list[str]) -> dict[str, str] | None:
        """A preset's fetch of texts by id; may raise ``QueryFailed``. None: cannot fetch.

        The generic target GETs its ``fetch:`` URL per id, with its headers
        (``probe/documents.py``).
        """
        fetch = self._config.fetch
        if fetch is None:
            return None

        async def get(url: str) -> tuple[int, Any]:
            request = self._client.build_request("GET", url, headers=self._headers)
            status, body = await self._ask_raw(request, accept=(404,))
            if status == 404:
                return status, None
            try:
                return status, decode_json(body)
            except ValueError as exc:
                reason = f"the document at {url} is not JSON: {not_json(exc, body, self._redact)}"
                raise QueryFailed("bad_response", reason) from exc

        return await texts_by_url(ids, fetch.url, fetch.text, get)

    async def _told(self, asked: Awaitable[T]) -> T | None:
        """What a look-up in the index told, None when it failed: a lookup that failed, or a
        bug in one, says nothing of the labels or the ranking. The canary's request stays the
        one ``validate --live`` shows."""
        sent = self.last_request
        try:
            return await asked
        except Exception:
            return None
        finally:
            self.last_request = sent

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """A preset's exact scores of ``ids``; may raise ``QueryFailed``. None: cannot tell."""
        return None

    async def index_state(self) -> IndexState:
        """What the index says of itself in one cheap call (its record count, its search
        settings), for the run's fingerprint; empty when this target cannot tell. May raise
        ``QueryFailed``; the canary's request stays the one shown."""
        sent = self.last_request
        try:
            return await self._index_state()
        finally:
            self.last_request = sent

    async def _index_state(self) -> IndexState:
        """A preset's count and settings; the generic target cannot tell."""
        return IndexState()

    async def _fetch_json(self, url: str) -> Any:
        """GET ``url`` and its JSON (a preset's look-up); raises ``QueryFailed`` for every
        failure."""
        request = self._client.build_request("GET", url, headers=self._headers)
        body = await self._exchange(request)
        try:
            return decode_json(body)
        except ValueError as exc:
            reason = f"the answer of GET {url} is not JSON: {not_json(exc, body, self._redact)}"
            raise QueryFailed("bad_response", reason) from exc

    async def _ask(self, request: httpx.Request, accept: Container[int] = ()) -> tuple[int, Any]:
        """The status and JSON answer of one lookup, retried like a query; ``QueryFailed`` else.

        Lookups go one at a time, never faster than ``rate_limit``; a status in ``accept`` is
        an answer (a 404 that says what is not there).
        """
        status, body = await self._ask_raw(request, accept)
        try:
            return status, decode_json(body)
        except ValueError as exc:
            reason = f"response is not JSON: {not_json(exc, body, self._redact)}"
            raise QueryFailed("bad_response", reason) from exc

    async def _ask_raw(
        self, request: httpx.Request, accept: Container[int] = ()
    ) -> tuple[int, bytes]:
        """``_ask`` without reading the body as JSON: the status and the bytes."""

        async def once() -> tuple[int, bytes]:
            if self._config.rate_limit:
                await self._sleep(1.0 / self._config.rate_limit)
            return await self._respond(request, accept)

        return await self._retrying.call(once)

    def _shape(self, config: TargetConfig) -> Mapping[str, Any]:
        """What the preset's API fixes of ``config``; ``SHAPE`` unless it depends on it."""
        return self.SHAPE

    def _setup(self, config: TargetConfig) -> None:
        """A preset's own settings, read from the config as written; the generic target has none."""

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """Ask for the top ``k`` of ``query``, retrying transient failures with backoff.

        ``vector`` is the query's embedding, sent where the body or params say ``{vector}``.
        """
        try:
            (ids, scores), latency = await self._retrying.timed(
                lambda: self._search_once(query, k, vector)
            )
        except QueryFailed as failure:
            reason = self._redact(failure.counted)
            return Answer((), (), failure.latency_s, failure.outcome, reason, failure.miss)
        return Answer(ids, scores, latency, "ok" if ids else "empty")

    async def _search_once(self, query: str, k: int, vector: Sequence[float] | None) -> _Ranked:
        """One request and its parsed answer; raises ``QueryFailed`` for every kind of failure."""
        return self._parse(await self._exchange(self._request(query, k, vector)), k)

    async def _exchange(self, request: httpx.Request) -> bytes:
        """Send ``request`` and read its whole body; raises ``QueryFailed`` for every failure."""
        return (await self._respond(request))[1]

    async def _respond(
        self, request: httpx.Request, accept: Container[int] = ()
    ) -> tuple[int, bytes]:
        """``_exchange``, with the status; a status in ``accept`` is read like a 2xx answer."""
        self.last_request = (request.method, str(request.url), request.content or None)
        # The deadline below times the whole exchange. A transport's own timeouts for the
        # connect, each read and the pool, at the same value or rounded up (aiohttp), could
        # only fire after it, and cost a timer set and cancelled per request and per chunk.
        request.extensions["timeout"] = _DEADLINE_ONLY
        timeout = self._config.timeout
        hide = self._redact
        received = False
        try:
            # The deadline covers the whole exchange: httpx's timeouts are per read, so a
            # body that drips one byte a second would otherwise never time out.
            async with asyncio.timeout(timeout):
                response = await self._send(request)
                received = True
                try:
                    if response.status_code not in accept:
                        await self._check_status(response)
                    body = await read_capped(response, self._config.max_response_bytes)
                finally:
                    await close(response)
        except QueryFailed:
            raise
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise QueryFailed(
                "timeout", f"no complete answer within {timeout:g}s ({kind(exc)})"
            ) from exc
        except httpx.TransportError as exc:
            raise QueryFailed("connect_error", f"connection failed: {describe(exc, hide)}") from exc
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            raise QueryFailed(
                "bad_response", f"unreadable response: {describe(exc, hide)}"
            ) from exc
        except Exception as exc:
            # A bug or an unforeseen library error must still end as an outcome, not a crash.
            outcome: Outcome = "bad_response" if received else "connect_error"
            raise QueryFailed(outcome, f"unexpected error: {describe(exc, hide)}") from exc
        return response.status_code, body

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``, following redirects within its origin (or anywhere, headers dropped).

        httpx alone would forward every header but ``Authorization`` to another host.
        """
        origin = _origin(request.url)
        for _ in range(MAX_REDIRECTS + 1):
            response = await self._client.send(request, stream=True)
            following = response.next_request
            if following is None:
                return response
            await close(response)
            if _origin(following.url) != origin:
                if self._config.follow_redirects != "any":
                    where = self._redact(str(following.url.copy_with(query=None)))[:200]
                    raise QueryFailed(
                        "bad_response",
                        f"redirect to another origin ({where}) refused; set "
                        "follow_redirects: any on the target to allow it",
                    )
                for name in self._config.headers:
                    following.headers.pop(name, None)
                origin = _origin(following.url)
            request = following
        raise QueryFailed("bad_response", f"more than {MAX_REDIRECTS} redirects")

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        config = self._config
        body = fill_template(config.body, query, k, vector) if config.method == "POST" else None
        if body is not None and not config.params:
            return self._posts.request(body)
        return self._client.build_request(
            config.method,
            config.url,
            params=fill_template(config.params, query, k, vector) or None,
            json=body,
            headers=self._headers,
        )

    async def _check_status(self, response: httpx.Response) -> None:
        code = response.status_code
        if 200 <= code < 300:
            return
        outcome = status_outcome(code)
        if outcome == "bad_response":
            raise QueryFailed(
                "bad_response", f"unexpected HTTP {code} {response.reason_phrase}".strip()
            )
        reason = f"HTTP {code} {response.reason_phrase}".strip()
        snippet = await error_snippet(
            response, self._redact, lambda error: self._error_message(code, error)
        )
        if snippet:
            reason = f"{reason}: {snippet}"
        if code in (401, 403) and self.AUTH_HINT:
            reason = f"{reason}; {self.AUTH_HINT}"
        wait = retry_after(code, response.headers.get("retry-after"), self._wall_clock())
        raise QueryFailed(outcome, reason, wait)

    def _error_message(self, code: int, error: Any) -> str | None:
        """What a preset reads in its API's JSON error body (HTTP ``code``); None: its start."""
        return None

    def _parse(self, body: bytes, k: int) -> _Ranked:
        hide = self._redact
        try:
            document = decode_json(body)
        except ValueError as exc:
            raise QueryFailed(
                "bad_response", f"response is not JSON: {not_json(exc, body, hide)}"
            ) from exc
        where = self._config.results
        try:
            hits = self._results(document)
            if hits is None:
                miss = self._miss("results", where, document)
                reason = f"no list of hits at {where!r} ({holding(miss.keys, 'the answer')})"
                raise QueryFailed("bad_response", reason, miss=miss)
            if not isinstance(hits, list):
                miss = self._miss("results", where, document)
                reason = f"{where!r} is {show(hits, hide)}, not a list of hits"
                raise QueryFailed("bad_response", reason, miss=miss)
            # Only the top k are stored, so a malformed hit below the cut must not fail the query.
            top = hits[:k]
            try:
                ids = tuple(map(self._hit_id, top, range(len(top))))
                if self._score is None:
                    return ids, (None,) * len(ids)
                return ids, tuple(map(self._hit_score, top, range(len(top))))
            except QueryFailed as failure:
                raise self._first_problem(top, failure) from None
        except JMESPathError as exc:
            raise QueryFailed(
                "bad_response", f"cannot apply response paths: {first_line(exc, hide)}"
            ) from exc

    def _first_problem(self, top: list[Any], failure: QueryFailed) -> QueryFailed:
        """The first problem in hit order (a hit's id before its score), and when a path
        found nothing in any of the hits, what it missed: the config, not the target, is wrong."""
        first = failure
        try:
            for index, hit in enumerate(top):
                self._hit_id(hit, index)
                if self._score is not None:
                    self._hit_score(hit, index)
        except QueryFailed as found:
            first = found
        miss = None
        if all(self._id(hit) is None for hit in top):
            miss = self._miss("id", self._config.id, *top)
        elif self._score is not None and all(self._score(hit) is None for hit in top):
            miss = self._miss("score", str(self._config.score), *top)
        if miss is None:
            return first
        reason = f"{first.reason} ({holding(miss.keys, 'the hits')})"
        return QueryFailed("bad_response", reason, miss=miss)

    def _miss(self, field: PathField, path: str, *found: Any) -> PathMiss:
        """What ``path`` (of ``field``) missed, with the keys of the objects in ``found``."""
        keys = dict.fromkeys(key for value in found if isinstance(value, dict) for key in value)
        shown = [self._redact(str(key))[:MAX_KEY_LENGTH] for key in list(keys)[:MAX_KEYS_SHOWN]]
        return PathMiss(field, path, tuple(shown))

    def _hit_id(self, hit: Any, index: int) -> str:
        """The id of the ``index``-th hit, as a string, as the target returned it.

        Ids are never redacted: ``acme-doc-1`` is the target's data even when ``acme`` is a
        secret, and masking it made a perfect retriever score 0. An id that *is* a secret
        (a field that echoes the request) is refused, so that no secret is ever stored.
        """
        raw_id = self._id(hit)
        if type(raw_id) is str and 0 < len(raw_id) <= MAX_ID_LENGTH:
            doc_id = raw_id  # the usual case, checked in one step
        else:
            doc_id = self._odd_id(raw_id, index)
        if self._redact.is_secret(doc_id):
            where = f"{self._config.results}[{index}]"
            raise QueryFailed(
                "bad_response",
                f"{where}: the id at {self._config.id!r} is the value of a secret (a header, "
                "a URL password or a ${VAR}), which is never stored; point id: at the "
                "document's own id",
            )
        return doc_id

    def _odd_id(self, raw_id: Any, index: int) -> str:
        """An id that is not a short string: an integer's digits, else ``QueryFailed``."""
        hide = self._redact
        where = f"{self._config.results}[{index}]"
        if raw_id is None or raw_id == "":
            raise QueryFailed("bad_response", f"{where}: no id at {self._config.id!r}")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
            raise QueryFailed(
                "bad_response",
                f"{where}: id at {self._config.id!r} is {show(raw_id, hide)}, "
                "not a string or integer",
            )
        doc_id = str(raw_id)
        if len(doc_id) > MAX_ID_LENGTH:
            raise QueryFailed(
                "bad_response",
                f"{where}: id at {self._config.id!r} has {len(doc_id)} characters; "
                f"ids may have at most {MAX_ID_LENGTH}",
            )
        return doc_id

    def _hit_score(self, hit: Any, index: int) -> float:
        """The score of the ``index``-th hit, a finite number (only called with a score path)."""
        score_of = self._score
        assert score_of is not None
        score = score_of(hit)
        if type(score) is float and math.isfinite(score):
            return score  # the usual case, checked in one step
        hide = self._redact
        where = f"{self._config.results}[{index}]"
        path = self._config.score
        if score is None:
            raise QueryFailed(
                "bad_response",
                f"{where}: no score at {path!r} (set score: null if the target returns none)",
            )
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise QueryFailed(
                "bad_response", f"{where}: score at {path!r} is {show(score, hide)}, not a number"
            )
        if not math.isfinite(score):
            raise QueryFailed(
                "bad_response", f"{where}: score at {path!r} is {score}, not a finite number"
            )
        return float(score)


_DEADLINE_ONLY = httpx.Timeout(None).as_dict()


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the default one filled in), as browsers compare origins."""
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def _secret_values(config: TargetConfig) -> list[str]:
    """Header values (and the credential after a scheme like ``Bearer``) and any URL password
    (as written, as sent, and as the Basic token made of it)."""
    secrets = []
    for value in config.headers.values():
        secrets.append(value)
        secrets.append(value.split()[-1] if value.split() else value)
    return secrets + credential_secrets(config.url)
