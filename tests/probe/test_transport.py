"""The production client (httpx over aiohttp) against real sockets: same outcomes as httpx's own.

Each failure is served by hand on 127.0.0.1 and asked through both clients: httpx's own
transport, whose behaviour the query outcomes were written against, and ``make_client``'s. Both must
raise the same httpx exception and give the same query outcome. Then what only the
production client is asked to do: honour the proxies of the environment, leave compressed
bodies to ``read_capped``, stop reading a 100 MB answer at the cap, and say who it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import math
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from forward_proxy import ForwardProxy
from listener import Listener
from retrievers import FakeRetriever, ServerThread

from ragcanary import __version__
from ragcanary.config.model import EmbeddingConfig
from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer
from ragcanary.probe.embedding import Embedder, make_embedding_client
from ragcanary.probe.target import HttpTarget, make_client
from ragcanary.probe.transport import Client, JsonPosts

HITS = json.dumps({"hits": [{"id": "doc-1", "score": 0.9}]}).encode()
MiB = 1024 * 1024
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "request_method")


def _httpx_own(config: TargetConfig) -> httpx.AsyncClient:
    """The reference: httpx's own transport, configured as the production client is."""
    return httpx.AsyncClient(verify=config.verify_tls, timeout=config.timeout)


CLIENTS: dict[str, Callable[[TargetConfig], httpx.AsyncClient]] = {
    "httpx": _httpx_own,
    "production": make_client,
}


@pytest.fixture(params=list(CLIENTS))
def client_for(request: pytest.FixtureRequest) -> Callable[[TargetConfig], httpx.AsyncClient]:
    """Each test runs with httpx's own transport and with the production one."""
    return CLIENTS[request.param]


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy from the machine's environment reaches a test unless it sets one itself."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


class RawServer(Listener):
    """A TCP server on 127.0.0.1 that reads one request per connection and lets ``behave``
    answer it on the socket by hand; ``sent`` counts the body bytes ``behave`` got out."""

    def __init__(self, behave: Callable[[RawServer, socket.socket], None]) -> None:
        super().__init__()
        self.behave = behave
        self.sent = 0
        self.requests: list[bytes] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/search"

    def handle(self, conn: socket.socket) -> None:
        self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append(head)
            with contextlib.suppress(OSError):  # the client gave up, as some tests want
                self.behave(self, conn)


def _headers(status: str = "200 OK", *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", *extra, "", ""]
    return "\r\n".join(lines).encode()


def _reset(conn: socket.socket) -> None:
    """Close with a TCP reset instead of an orderly shutdown."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _reset_before_answer(server: RawServer, conn: socket.socket) -> None:
    _reset(conn)


def _close_before_answer(server: RawServer, conn: socket.socket) -> None:
    conn.shutdown(socket.SHUT_RDWR)


def _reset_mid_body(server: RawServer, conn: socket.socket) -> None:
    conn.sendall(_headers("200 OK", "Content-Length: 1000") + HITS[:10])
    time.sleep(0.05)
    _reset(conn)


def _close_mid_body(server: RawServer, conn: socket.socket) -> None:
    conn.sendall(_headers("200 OK", "Content-Length: 1000") + HITS[:10])
    conn.shutdown(socket.SHUT_RDWR)


def _not_http(server: RawServer, conn: socket.socket) -> None:
    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    conn.shutdown(socket.SHUT_RDWR)


def _silent(server: RawServer, conn: socket.socket) -> None:
    server.closing.wait(5)


def _answer(server: RawServer, conn: socket.socket) -> None:
    conn.sendall(_headers("200 OK", f"Content-Length: {len(HITS)}") + HITS)


def _config(url: str, **fields: Any) -> TargetConfig:
    return TargetConfig(url=url, body={"q": "{query}"}, retries=0, **fields)


async def _search(client_for: Callable[[TargetConfig], httpx.AsyncClient], url: str) -> Answer:
    config = _config(url, timeout=1.0)
    async with client_for(config) as client:
        return await HttpTarget("t", config, client).search("q", 5)


@pytest.mark.parametrize(
    ("behave", "outcome"),
    [
        (_reset_before_answer, "connect_error"),
        (_close_before_answer, "connect_error"),
        (_reset_mid_body, "connect_error"),
        (_close_mid_body, "connect_error"),
        (_not_http, "connect_error"),
        (_silent, "timeout"),
        (_answer, "ok"),
    ],
)
def test_each_broken_exchange_has_the_outcome_it_has_with_httpx_alone(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    behave: Callable[[RawServer, socket.socket], None],
    outcome: str,
) -> None:
    """Resets and closes before or during the body, a non-HTTP answer, silence: as with httpx."""
    with RawServer(behave) as server:
        answer = asyncio.run(_search(client_for, server.url))
    assert answer.outcome == outcome, answer


def test_a_refused_connection_is_connect_error(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
) -> None:
    """Nothing listening: httpx.ConnectError, not a timeout, and connect_error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/search"

    async def post() -> None:
        async with client_for(_config(url)) as client:
            await client.post(url, json={})

    with pytest.raises(httpx.ConnectError):
        asyncio.run(post())
    answer = asyncio.run(_search(client_for, url))
    assert answer.outcome == "connect_error"
    assert answer.error.startswith("connection failed: ConnectError")


@pytest.fixture
def full_backlog() -> Iterator[str]:
    """The URL of a listener whose accept queue is full: a new connection is never set up."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        fillers = []
        try:
            for _ in range(3):  # the kernel drops SYNs once its small queue is full
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(address)
                fillers.append(filler)
            time.sleep(0.1)
            yield f"http://127.0.0.1:{address[1]}/search"
        finally:
            for filler in fillers:
                filler.close()


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        (httpx.Timeout(5.0, connect=0.3), httpx.ConnectTimeout),
        (httpx.Timeout(5.0, read=0.3), httpx.ReadTimeout),
    ],
)
def test_connect_and_read_timeouts_raise_httpx_s_own_exceptions(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    full_backlog: str,
    timeout: httpx.Timeout,
    error: type[httpx.TimeoutException],
) -> None:
    """A connection never set up is a ConnectTimeout, an answer that never comes a ReadTimeout."""
    with RawServer(_silent) as server:
        url = full_backlog if error is httpx.ConnectTimeout else server.url

        async def post() -> float:
            started = time.perf_counter()
            async with client_for(_config(url)) as client:
                with pytest.raises(error):
                    await client.post(url, json={}, timeout=timeout)
            return time.perf_counter() - started

        took = asyncio.run(post())
    assert 0.25 < took < 3


def test_a_connect_timeout_is_the_timeout_outcome(
    client_for: Callable[[TargetConfig], httpx.AsyncClient], full_backlog: str
) -> None:
    """The target's own deadline ends a connection attempt that hangs."""
    answer = asyncio.run(_search(client_for, full_backlog))
    assert answer.outcome == "timeout"
    assert answer.error.startswith("no complete answer within 1s")


def test_429_waits_as_retry_after_says_then_answers(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
) -> None:
    """A real 429 with Retry-After: 1 is retried after one second, then answered."""
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        retriever.status = 200

    with FakeRetriever(status=429, retry_after="1") as retriever:

        async def search() -> Answer:
            config = retriever.target_config(retries=1)
            async with client_for(config) as client:
                return await HttpTarget("t", config, client, sleep=sleep).search("pricing plans", 3)

        answer = asyncio.run(search())
    assert (answer.outcome, answer.ids) == ("ok", ("doc-3", "doc-7"))
    assert delays == [1.0]


# --- what only the production client is asked --------------------------------------------------


def test_production_client_is_httpx_over_aiohttp() -> None:
    """The production client keeps httpx's API; its transport is aiohttp's."""
    client = make_client(_config("http://127.0.0.1:1/search"))
    assert isinstance(client, httpx.AsyncClient)
    assert isinstance(client, Client)
    asyncio.run(client.aclose())


class _Recorder(BaseHTTPRequestHandler):
    """Answers HITS, gzipped at ``/gzip``, with a cookie at ``/cookie``; records each request's
    headers."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[list[tuple[str, str]]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(list(self.headers.items()))
        data, extra = HITS, []
        if self.path == "/gzip":
            data, extra = gzip.compress(HITS), [("Content-Encoding", "gzip")]
        if self.path == "/cookie":
            extra = [("Set-Cookie", "lb=one; Path=/")]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[list[tuple[str, str]]]]]:
    """A base URL and the headers of every request it receives, in order."""
    seen: ClassVar[list[list[tuple[str, str]]]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    serving = ServerThread(handler)
    try:
        yield f"http://127.0.0.1:{serving.address[1]}", seen
    finally:
        serving.stop()


def _named(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [value for key, value in headers if key.lower() == name]


def test_our_user_agent_and_encodings_are_sent_once_and_as_ours(
    recorder: tuple[str, list[list[tuple[str, str]]]],
) -> None:
    """aiohttp adds no User-Agent or Accept-Encoding of its own, for targets and embedders."""
    base, seen = recorder

    async def ask() -> None:
        config = _config(f"{base}/search")
        async with make_client(config) as client:
            assert (await HttpTarget("t", config, client).search("q", 5)).outcome == "ok"
        endpoint = EmbeddingConfig(url=f"{base}/v1/embeddings", model="m", retries=0)
        async with make_embedding_client(endpoint) as client:
            await Embedder("e", endpoint, client).embed(["q"])  # answered badly; only headers

    asyncio.run(ask())
    assert len(seen) == 2
    for headers in seen:
        assert _named(headers, "user-agent") == [f"ragcanary/{__version__}"]
        assert _named(headers, "accept-encoding") == ["gzip, deflate"]


def test_a_retriever_s_cookie_comes_back_once_as_httpx_sends_it(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    recorder: tuple[str, list[list[tuple[str, str]]]],
) -> None:
    """A cookie a retriever sets (a load balancer's) returns in one header, from httpx's jar."""
    base, seen = recorder

    async def ask() -> None:
        config = _config(f"{base}/cookie")
        async with client_for(config) as client:
            target = HttpTarget("t", config, client)
            for _ in range(2):
                assert (await target.search("q", 5)).outcome == "ok"

    asyncio.run(ask())
    assert _named(seen[0], "cookie") == []
    assert _named(seen[1], "cookie") == ["lb=one"]


def test_cookies_set_on_the_client_and_by_the_retriever_go_out_together(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    recorder: tuple[str, list[list[tuple[str, str]]]],
) -> None:
    """The production client keeps httpx's jar (it only skips answers that set no cookie):
    cookies given to ``client.cookies`` go out, and a retriever's join them."""
    base, seen = recorder

    async def ask() -> None:
        config = _config(f"{base}/cookie")
        async with client_for(config) as client:
            client.cookies = {"session": "abc"}
            target = HttpTarget("t", config, client)
            for _ in range(2):
                assert (await target.search("q", 5)).outcome == "ok"

    asyncio.run(ask())
    assert _named(seen[0], "cookie") == ["session=abc"]
    assert sorted(_named(seen[1], "cookie")[0].split("; ")) == ["lb=one", "session=abc"]


def test_a_gzip_body_reaches_us_compressed_and_is_inflated_by_read_capped(
    recorder: tuple[str, list[list[tuple[str, str]]]],
) -> None:
    """aiohttp must not inflate behind our back: read_capped does, within its cap."""
    base, _ = recorder

    async def ask() -> tuple[bytes, Answer]:
        config = _config(f"{base}/gzip")
        async with make_client(config) as client:
            async with client.stream("POST", config.url, json={}) as response:
                raw = b"".join([chunk async for chunk in response.aiter_raw()])
            return raw, await HttpTarget("t", config, client).search("q", 5)

    raw, answer = asyncio.run(ask())
    assert raw[:2] == b"\x1f\x8b"  # gzip's magic number: still compressed
    assert (answer.outcome, answer.ids) == ("ok", ("doc-1",))


def _endless(server: RawServer, conn: socket.socket) -> None:
    """100 MB without a Content-Length, for as long as the client reads."""
    _endless_after(server, conn, _headers("200 OK", "Connection: close"))


def _declared(server: RawServer, conn: socket.socket) -> None:
    """A Content-Length of 100 MB, then the body as slowly as a client reads it."""
    _endless_after(server, conn, _headers("200 OK", f"Content-Length: {100 * MiB}"))


def _endless_after(server: RawServer, conn: socket.socket, head: bytes) -> None:
    conn.sendall(head)
    chunk = b" " * 65536
    while server.sent < 100 * MiB and not server.closing.is_set():
        conn.sendall(chunk)
        server.sent += len(chunk)


@pytest.mark.parametrize("behave", [_endless, _declared])
def test_a_100_mb_answer_is_not_read_past_the_cap(
    behave: Callable[[RawServer, socket.socket], None],
) -> None:
    """The production client stops reading at max_response_bytes; memory stays near the cap."""
    cap = MiB
    with RawServer(behave) as server:

        async def search() -> Answer:
            config = _config(server.url, max_response_bytes=cap, timeout=10.0)
            async with make_client(config) as client:
                return await HttpTarget("t", config, client).search("q", 5)

        tracemalloc.start()
        try:
            answer = asyncio.run(search())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        time.sleep(0.2)  # the server notices the closed connection
        sent = server.sent
    assert answer.outcome == "bad_response"
    assert answer.error.startswith(f"response larger than {cap} bytes")
    assert peak < 8 * cap, f"{peak / MiB:.1f} MiB allocated at the peak"
    # Socket buffers on both sides hold a few MB at most; the rest was never sent.
    assert sent < 20 * MiB, f"{sent / MiB:.0f} MiB sent"


# --- proxies from the environment --------------------------------------------------------------


def test_http_proxy_from_the_environment_carries_the_query(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HTTP_PROXY is used as httpx uses it, and NO_PROXY bypasses it for the hosts it names."""
    with ForwardProxy() as proxy, RawServer(_answer) as server:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        answer = asyncio.run(_search(client_for, server.url))
        assert answer.outcome == "ok", answer
        assert proxy.seen == [f"POST {server.url}"]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        answer = asyncio.run(_search(client_for, server.url))
        assert answer.outcome == "ok", answer
        assert len(proxy.seen) == 1
        assert len(server.requests) == 2


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed; it is needed to make a self-signed certificate")
    directory: Path = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture(scope="module")
def https_url(certificate: tuple[Path, Path]) -> Iterator[str]:
    """A retriever on 127.0.0.1 serving HTTPS with ``certificate``."""
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    handler = type("Recorder", (_Recorder,), {"seen": []})
    serving = ServerThread(handler, tls=context)
    try:
        yield f"https://127.0.0.1:{serving.address[1]}/search"
    finally:
        serving.stop()


@pytest.mark.parametrize(("verify_tls", "outcome"), [(True, "connect_error"), (False, "ok")])
def test_https_proxy_tunnels_tls_and_the_certificate_is_still_checked(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    monkeypatch: pytest.MonkeyPatch,
    https_url: str,
    verify_tls: bool,
    outcome: str,
) -> None:
    """HTTPS_PROXY gets a CONNECT; TLS inside it is verified unless the target turns it off."""
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)

        async def search() -> Answer:
            config = _config(https_url, verify_tls=verify_tls)
            async with client_for(config) as client:
                return await HttpTarget("t", config, client).search("q", 5)

        answer = asyncio.run(search())
    assert answer.outcome == outcome, answer
    assert proxy.seen == [f"CONNECT {https_url.split('/')[2]}"]
    if not verify_tls:
        assert answer.ids == ("doc-1",)
    else:
        assert "certificate" in answer.error.lower()


def test_ssl_cert_file_is_trusted_as_httpx_trusts_it(
    client_for: Callable[[TargetConfig], httpx.AsyncClient],
    monkeypatch: pytest.MonkeyPatch,
    https_url: str,
    certificate: tuple[Path, Path],
) -> None:
    """SSL_CERT_FILE names the certificates TLS verification trusts, as httpx reads it."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    answer = asyncio.run(_search(client_for, https_url))
    assert answer.outcome == "ok", answer
    assert answer.ids == ("doc-1",)


def test_a_missing_ssl_cert_file_fails_only_the_queries_that_speak_tls(
    monkeypatch: pytest.MonkeyPatch,
    https_url: str,
) -> None:
    """The production client reads the certificates for its first HTTPS query: a bad
    SSL_CERT_FILE fails those queries, saying what to check, and plain HTTP still answers
    (httpx's own client refuses to be built at all)."""
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    with RawServer(_answer) as server:
        assert asyncio.run(_search(make_client, server.url)).outcome == "ok"
    answer = asyncio.run(_search(make_client, https_url))
    assert answer.outcome == "connect_error"
    assert "cannot load the certificates TLS trusts" in answer.error
    assert "SSL_CERT_FILE" in answer.error


# Run in a new process, so that ragcanary imports aiohttp there, as the CLI and daemon do.
_FRESH_PROCESS_PROBE = """
import asyncio, json, ssl, sys
create, load = ssl.create_default_context, ssl.SSLContext.set_default_verify_paths
from ragcanary.config.target import TargetConfig
from ragcanary.probe.target import HttpTarget, make_client
import aiohttp.connector as connector

async def search():
    config = TargetConfig(url=sys.argv[1], body={"q": "{query}"}, retries=0, timeout=5.0)
    async with make_client(config) as client:
        answer = await HttpTarget("t", config, client).search("q", 5)
    return [answer.outcome, answer.error]

verified, unverified = connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED
print(json.dumps({
    "aiohttp_default_certificates": [
        verified.cert_store_stats()["x509"], unverified.cert_store_stats()["x509"]
    ],
    "aiohttp_default_verifies": verified.verify_mode == ssl.CERT_REQUIRED
    and verified.check_hostname,
    "ssl_restored": ssl.create_default_context is create
    and ssl.SSLContext.set_default_verify_paths is load,
    "search": asyncio.run(search()),
    "default_certificates_after": ssl.create_default_context().cert_store_stats()["x509"],
}))
"""


@pytest.mark.parametrize("trusted", [True, False])
def test_aiohttp_loads_no_certificates_of_its_own_and_ours_still_verify(
    https_url: str, certificate: tuple[Path, Path], trusted: bool
) -> None:
    """Imported by ragcanary, aiohttp's default TLS contexts load no CA file (the probe never
    uses them, and were they used they would verify against nothing); every query still
    verifies with httpx's trust, and the ssl module is as it was."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("SSL_CERT_FILE", "SSL_CERT_DIR") and "proxy" not in name.lower()
    }
    if trusted:
        environment["SSL_CERT_FILE"] = str(certificate[0])
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS_PROBE, https_url],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["aiohttp_default_certificates"] == [0, 0]
    assert seen["aiohttp_default_verifies"] is True
    assert seen["ssl_restored"] is True
    outcome, error = seen["search"]
    if trusted:
        assert outcome == "ok", error
        assert seen["default_certificates_after"] == 1  # SSL_CERT_FILE, as OpenSSL reads it
    else:
        assert outcome == "connect_error"
        assert "certificate verify failed" in error


def test_a_socks_proxy_fails_each_query_with_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp speaks to HTTP proxies only: a SOCKS one is a connect_error saying so."""
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    answer = asyncio.run(_search(make_client, "http://127.0.0.1:9/search"))
    assert answer.outcome == "connect_error"
    assert "socks5:// proxies are not supported" in answer.error


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer s3cret", "X-Tenant": "blue"},
        {"content-type": "application/json; charset=utf-8", "User-Agent": "theirs/1"},
        {"Accept-Encoding": "identity", "Host": "search.example.com"},
    ],
)
def test_json_posts_are_the_requests_the_client_builds(headers: dict[str, str]) -> None:
    """A target's queries, built from the first one, equal what ``build_request`` builds: the
    same headers in the same order, the same body bytes, the same timeouts; with a cookie in
    the jar too, and a document httpx refuses is refused alike."""
    config = _config("http://127.0.0.1:9/v1/search?tenant=a")
    client = make_client(config)
    target_headers = httpx.Headers({"Accept-Encoding": "gzip, deflate", **headers})
    posts = JsonPosts(client, config.url, target_headers)
    documents = [
        {"q": "first", "k": 5},
        {"q": "naïve café — 東京", "k": 10, "filter": {"lang": ["de", "fr"]}},
        {"vector": [0.25, -1e-7, 3.0], "k": 3, "exact": True, "none": None},
    ]

    def built(document: Any) -> tuple[Any, ...]:
        request = client.build_request("POST", config.url, json=document, headers=target_headers)
        return _shown(request)

    for document in documents:
        assert _shown(posts.request(document)) == built(document)
    client.cookies.set("lb", "one")
    assert _shown(posts.request(documents[1])) == built(documents[1])
    client.cookies.clear()
    assert _shown(posts.request(documents[2])) == built(documents[2])
    with pytest.raises(ValueError, match="Out of range float"):
        client.build_request("POST", config.url, json={"v": [math.nan]})
    with pytest.raises(ValueError, match="Out of range float"):
        posts.request({"v": [math.nan]})


def _shown(request: httpx.Request) -> tuple[Any, ...]:
    return (
        request.method,
        str(request.url),
        request.headers.raw,
        request.read(),
        request.extensions,
    )
