"""The production HTTP client: httpx's API over aiohttp's connections (``httpx-aiohttp``).

httpx's own transport (httpcore) spends about three times aiohttp's CPU on each request, and
the probe's CPU is what limits a cycle and a daemon (docs/performance.md, "Cycle time").
``Transport``, an ``httpx_aiohttp.AiohttpTransport``, configures aiohttp's session from httpx's
settings (TLS verification, limits, proxy) and sends each request on it as httpx's own
transport would, so that nothing ``HttpTarget`` decides a query's outcome from changes:

- header names go out as written and the body as bytes (the package lower-cases names and
  streams a redirect's body chunked, even an empty GET's);
- bodies arrive as sent (``auto_decompress=False``): ``read_capped`` inflates within its cap,
  and reads no further than it; only an uncompressed body of a declared length of at most
  ``EAGER_BYTES`` is read with its headers; no redirect is followed (``HttpTarget`` does that);
- TLS trusts what httpx's context trusts (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else certifi's
  bundle), loaded for the first request that speaks TLS to its target or proxy; a file that
  cannot be loaded fails those requests with ``httpx.ConnectError``. aiohttp's own default
  contexts are never used, so they load no CA file (``tls_defaults``);
- every aiohttp error is raised as the httpx exception httpx's own transport raises for the
  same failure (the package maps a refused connection and a read timeout alike to
  ``httpx.ConnectTimeout``)::

      aiohttp.ClientError
      ├── ConnectionTimeoutError (connect, or waiting for the pool) ... httpx.ConnectTimeout
      ├── ServerTimeoutError (a read) ................................. httpx.ReadTimeout
      ├── ClientProxyConnectionError, ClientHttpProxyError ............ httpx.ProxyError
      ├── ClientConnectorError (refused, DNS, TLS certificate) ........ httpx.ConnectError
      ├── ClientOSError (reset, broken pipe) .......................... httpx.ReadError
      ├── InvalidURL, NonHttpUrlClientError ........................... httpx.UnsupportedProtocol
      └── anything else (disconnect, bad HTTP, short body) ............ httpx.RemoteProtocolError

``Client`` honours ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` exactly as
httpx does: httpx reads them and mounts a proxied transport per pattern, but only for the
transports it builds itself, so ``Client`` builds ours there instead of being passed one.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ragcanary.probe.tls_defaults import no_default_tls_contexts

with no_default_tls_contexts():
    import aiohttp
    from httpx_aiohttp import AiohttpTransport

# httpx's default limits, as its methods declare them; the client always passes its own.
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
# Bodies up to this size, uncompressed and of a declared length, are read with their headers.
EAGER_BYTES = 64 * 1024
# JSON as httpx encodes a request's ``json=``; one encoder, as json.dumps with options builds a
# new one every call.
_HTTPX_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# First match wins: subclasses before their bases (see the tree in the module docstring).
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.ClientError, httpx.RemoteProtocolError),
)


def _translated(exc: aiohttp.ClientError) -> httpx.TransportError:
    """The httpx exception httpx's own transport raises for the failure aiohttp raised."""
    httpx_type = next(h for a, h in _ERRORS if isinstance(exc, a))  # the last row matches all
    return httpx_type(str(exc) or type(exc).__name__)


@functools.lru_cache(maxsize=64)
def _timeout(
    connect: float | None, read: float | None, pool: float | None
) -> aiohttp.ClientTimeout:
    """aiohttp's timeouts for httpx's: a target asks with the same ones every time."""
    # aiohttp's connect covers the pool's wait and the connect.
    return aiohttp.ClientTimeout(sock_connect=connect, sock_read=read, connect=pool)


def _small_and_plain(response: aiohttp.ClientResponse) -> bool:
    """Whether ``response``'s body is read with its headers: an uncompressed body of a declared
    length of at most ``EAGER_BYTES``. Any other is streamed, so that ``read_capped`` can stop
    it at the target's cap and inflate it within that cap."""
    length = response.content_length
    return (
        length is not None
        and length <= EAGER_BYTES
        and response.headers.get("Content-Encoding", "identity").strip().lower() in ("", "identity")
    )


class Transport(AiohttpTransport):
    """aiohttp's session as ``AiohttpTransport`` configures it (TLS, limits, proxy), asked the
    way httpx's own transport would ask: header names as written, the body as bytes, and
    aiohttp's failures raised as httpx's exceptions."""

    def __init__(
        self,
        verify: ssl.SSLContext | str | bool,
        cert: Any,
        trust_env: bool,
        limits: httpx.Limits,
        proxy: httpx.Proxy | None = None,
    ) -> None:
        # Not the package's __init__: it builds the TLS context at once, loading the CA bundle
        # (about 50 ms per client), for targets that may never speak TLS.
        self._tls_settings = (verify, cert, trust_env)
        self._tls: ssl.SSLContext | None = None
        self.limits = limits
        self.proxy = proxy
        self.client = None

    def tls_context(self) -> ssl.SSLContext:
        """httpx's TLS context for this transport's settings, built on first use."""
        if self._tls is None:
            verify, cert, trust_env = self._tls_settings
            try:
                self._tls = httpx.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
            except OSError as exc:  # ssl.SSLError is one too
                raise httpx.ConnectError(
                    f"cannot load the certificates TLS trusts ({exc}); check the files that "
                    "SSL_CERT_FILE or SSL_CERT_DIR name"
                ) from exc
        return self._tls

    def get_client(self) -> aiohttp.ClientSession:
        """The package's session, but cookies are httpx's alone to keep and send, as with
        httpx's own transport (aiohttp's jar would send a retriever's cookies a second way).

        Its connections take their TLS context from each request (``handle_async_request``).
        """
        limit = self.limits.max_connections
        connector = aiohttp.TCPConnector(
            keepalive_timeout=self.limits.keepalive_expiry,
            limit=limit if limit is not None else 0,  # 0: no limit, as httpx's None
        )
        return aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        timeout = request.extensions.get("timeout", {})
        proxy = self.proxy
        # aiohttp takes the TLS context of the request for the target and for its proxy.
        tls = request.url.scheme == "https" or (proxy is not None and proxy.url.scheme == "https")
        # httpx builds a redirect's request around the previous body's stream, unread; sent as
        # a stream it would go chunked, even an empty GET's. Our bodies are small JSON.
        body = await request.aread()
        try:
            response = await self.client.request(
                request.method,
                str(request.url),
                # .raw keeps the names as written (.items() would lower-case them).
                headers=[
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                ],
                data=body or None,
                allow_redirects=False,  # HttpTarget follows them, deciding who gets headers
                auto_decompress=False,  # read_capped inflates, within its cap
                compress=False,
                ssl=self.tls_context() if tls else True,
                timeout=_timeout(timeout.get("connect"), timeout.get("read"), timeout.get("pool")),
                server_hostname=request.extensions.get("sni_hostname"),
                proxy=str(proxy.url) if proxy else None,
                proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
                proxy_headers=proxy.headers if proxy else None,
            )
            # A canary's answer is a few kilobytes that came with its headers: read at once,
            # it skips a stream's layers (3% of the client's instructions per query).
            stream = (
                httpx.ByteStream(await response.read())
                if _small_and_plain(response)
                else _Body(response)
            )
        except aiohttp.ClientError as exc:
            raise _translated(exc) from exc
        version = response.version
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=stream,
            request=request,
            extensions={
                "http_version": f"HTTP/{version.major}.{version.minor}".encode()
                if version
                else b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode("latin-1", "replace"),
            },
        )


async def close(response: httpx.Response) -> None:
    """Close ``response`` and free it as soon as its last reference goes.

    httpx's client leaves a response and its body's stream referring to each other (a
    reference cycle), so every response, with its request, headers and aiohttp's response,
    waited for the garbage collector, whose passes over that much garbage held the event loop
    for tens of milliseconds at a daemon's rate of queries (docs/performance.md, "Scale of one
    daemon"). Once closed, the stream is never read again.
    """
    try:
        await response.aclose()
    finally:
        response.stream = _CLOSED


_CLOSED = httpx.ByteStream(b"")


class _Body(httpx.AsyncByteStream):
    """A response body, read as it arrives; closing it early closes its connection."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except aiohttp.ClientError as exc:
            raise _translated(exc) from exc

    async def aclose(self) -> None:
        # A body not read to its end cannot be reused: aiohttp then closes the connection.
        self._response.release()


class Client(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose direct and proxied transports are ``Transport``.

    Pass no ``transport``: httpx mounts the proxies of the environment only when it builds
    the transports itself, through these two methods.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cookies = self._cookies  # httpx's __init__ sets the jar without its setter

    def build_request(self, method: str, url: httpx.URL | str, **kwargs: Any) -> httpx.Request:
        """httpx's request, its URL parsed once per distinct URL rather than twice per request
        (a tenth of our CPU per query): a target asks the same URL every time."""
        return super().build_request(
            method, _parsed(url) if isinstance(url, str) else url, **kwargs
        )

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._cookies = _Cookies(cookies)

    def _init_transport(
        self,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> httpx.AsyncBaseTransport:
        if transport is not None:
            return transport
        return Transport(verify=verify, cert=cert, trust_env=trust_env, limits=limits)

    def _init_proxy_transport(
        self,
        proxy: httpx.Proxy,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
    ) -> httpx.AsyncBaseTransport:
        if proxy.url.scheme not in ("http", "https"):
            return _Unsupported(proxy.url.scheme)
        return Transport(verify=verify, cert=cert, trust_env=trust_env, limits=limits, proxy=proxy)


class JsonPosts:
    """Requests that POST a JSON document to one URL with the same headers: a target's queries.

    Each is the request ``client.build_request("POST", url, json=..., headers=...)`` builds,
    header for header and byte for byte (its timeouts the client's), but made from the first one
    the client built, rather than merging and checking the same headers again every time (a
    fifth of the client's instructions per query, counted with callgrind). While the client
    keeps a cookie, which goes out in a header of its own, the client builds every request.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        headers: httpx.Headers,
    ) -> None:
        self._client = client
        self._headers = headers
        self._url = url
        self._model: httpx.Request | None = None

    def request(self, document: Any) -> httpx.Request:
        """The request that sends ``document``; ``ValueError`` for NaN or infinity in it, as
        httpx raises."""
        model = self._model
        if model is None or self._client.cookies:
            built = self._client.build_request(
                "POST", self._url, json=document, headers=self._headers
            )
            if not self._client.cookies:
                self._model = built
            return built
        body = _HTTPX_JSON.encode(document).encode("utf-8")
        headers = httpx.Headers(model.headers)
        headers["Content-Length"] = str(len(body))
        request = httpx.Request(
            "POST",
            model.url,
            headers=headers,
            stream=httpx.ByteStream(body),  # headers as given, none added
            extensions=dict(model.extensions),
        )
        request.read()
        return request


@functools.lru_cache(maxsize=1024)
def _parsed(url: str) -> httpx.URL:
    return httpx.URL(url)


class _Cookies(httpx.Cookies):
    """httpx's cookie jar, which skips the answers that set no cookie.

    httpx hands every response to the standard library's jar, which wraps it in two adapter
    objects only to find no ``Set-Cookie`` header: a tenth of our CPU per query. The jar ignores
    ``Set-Cookie2`` (its policy's default), so skipping those answers changes nothing it keeps.
    """

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class _Unsupported(httpx.AsyncBaseTransport):
    """A proxy aiohttp cannot speak to (SOCKS): every request fails as a connection error.

    httpx without the socksio package refuses to build the client; a daemon should rather
    report each query's failure, with what to change, than fail every run.
    """

    def __init__(self, scheme: str) -> None:
        self._scheme = scheme

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ProxyError(
            f"{self._scheme}:// proxies are not supported; "
            "set HTTP_PROXY, HTTPS_PROXY or ALL_PROXY to an http:// proxy",
            request=request,
        )
