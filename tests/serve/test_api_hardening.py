"""The HTTP server under abuse, against a real `ragcanary serve`: slow clients, huge bodies, tokens.

/metrics, /healthz and /readyz must stay reachable while many clients hold connections open
without finishing a request; admin routes authenticate before reading a body; bodies are capped.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from daemon_harness import DaemonProcess, free_port, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry

API_KEY = "sk-hardening-51c0"
ADMIN_TOKEN = "adm-hardening-7e4d"
QUERIES = [f"question {i:02d}" for i in range(4)]
SLOW_CLIENTS = 1100
DAEMON_FILES = 1024
# A storm: connections from many threads at once keep the daemon's accept queue full, so that
# asyncio accepts a full batch on every pass of the event loop.
STORM_CLIENTS = 5000
STORM_THREADS = 16


@contextlib.contextmanager
def running_daemon(tmp_path: Path, files: tuple[int, int]) -> Iterator[DaemonProcess]:
    """A daemon watching a fake retriever, allowed ``files`` (soft, hard) open files."""
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        cases = [
            {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
        ]
        (tmp_path / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
        port = free_port()
        config = {
            "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{port}",
            "targets": {"vendor": target_entry(retriever.url)},
            "suites": {"core": {"cases": "core.yaml", "targets": ["vendor"], "every": "1s"}},
        }
        (tmp_path / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        env = {"VENDOR_KEY": API_KEY, "RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN}
        started = DaemonProcess(tmp_path / "ragcanary.yaml", port, env, files).start()
        try:
            yield started
        finally:
            if started.process.poll() is None:
                started.stop()
            started.kill()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    # The usual default of 1,024 open files, which 1,100 clients exceed, and no more (the
    # daemon would raise its soft limit to a higher hard one).
    with running_daemon(tmp_path, (DAEMON_FILES, DAEMON_FILES)) as started:
        yield started


@contextlib.contextmanager
def slow_clients(port: int, count: int, threads: int = 1) -> Iterator[list[socket.socket]]:
    """``count`` connections that send the start of a request line and then nothing more.

    They are opened from ``threads`` threads at once.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1000), hard))
    sockets: list[socket.socket] = []
    lock = threading.Lock()

    def connect(how_many: int) -> None:
        for _ in range(how_many):
            sock = socket.socket()
            with lock:
                sockets.append(sock)
            sock.settimeout(5)
            with contextlib.suppress(OSError):
                sock.connect(("127.0.0.1", port))
                sock.send(b"GET /metrics HTTP/1.1\r\nHost: x")

    workers = [
        threading.Thread(target=connect, args=(count // threads + (i < count % threads),))
        for i in range(threads)
    ]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def _timed_get(url: str) -> tuple[int, float]:
    started = time.monotonic()
    try:
        status = httpx.get(url, timeout=10).status_code
    except httpx.HTTPError:
        status = 0
    return status, time.monotonic() - started


@pytest.mark.slow
def test_slow_clients_never_starve_metrics_health_or_readiness(daemon: DaemonProcess) -> None:
    with slow_clients(daemon.port, SLOW_CLIENTS):
        for path in ("/metrics", "/healthz", "/readyz", "/metrics"):
            status, took = _timed_get(daemon.url + path)
            assert status == 200, f"{path} answered {status} with {SLOW_CLIENTS} slow clients"
            assert took <= 3.0, f"{path} took {took:.1f}s with {SLOW_CLIENTS} slow clients"
        # The schedule keeps running meanwhile.
        daemon.wait_runs("core", "vendor", 1, 30)
    assert "Traceback" not in daemon.log
    assert len(daemon.log) < 100_000, f"{len(daemon.log)} characters of log for slow clients"


@pytest.mark.slow
def test_a_connect_storm_never_runs_the_daemon_out_of_files(daemon: DaemonProcess) -> None:
    # Out of files, the daemon could not open a connection to its targets either: a false alarm.
    with slow_clients(daemon.port, STORM_CLIENTS, STORM_THREADS):
        status, _took = _timed_get(daemon.url + "/healthz")
        assert status == 200, f"/healthz answered {status} during a connect storm"
    assert "Too many open files" not in daemon.log
    outcomes = {event["outcome"] for event in daemon.events() if event["event"] == "run"}
    assert outcomes == {"ok"}, f"runs during a connect storm: {outcomes}"


def test_the_daemon_raises_its_soft_limit_of_open_files_to_the_hard_one(tmp_path: Path) -> None:
    # As containers now start (soft 1,024, hard 524,288), where Kubernetes cannot raise it.
    with running_daemon(tmp_path, (DAEMON_FILES, 4 * DAEMON_FILES)) as started:
        soft, hard = resource.prlimit(started.process.pid, resource.RLIMIT_NOFILE)
    assert (soft, hard) == (4 * DAEMON_FILES, 4 * DAEMON_FILES)


def test_a_client_that_never_finishes_its_request_is_dropped(daemon: DaemonProcess) -> None:
    with slow_clients(daemon.port, 1) as (sock,):
        sock.settimeout(30)

        def dropped() -> bool:
            try:
                return sock.recv(1024) == b""
            except ConnectionResetError:
                return True

        assert wait_for(dropped, 30, "the server to drop a client that sent half a request")


def test_a_huge_unauthenticated_body_is_refused_before_it_is_read(daemon: DaemonProcess) -> None:
    body = b"{" + b" " * (50 * 1024 * 1024) + b"}"
    started = time.monotonic()
    try:
        response = httpx.post(
            daemon.url + "/api/v1/baselines/core/vendor",
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        status = response.status_code
    except httpx.HTTPError:  # the server may close the connection once it has answered
        status = 401
    assert status in (401, 413)
    assert time.monotonic() - started <= 3.0
    rss_kib = _rss_kib(daemon.process.pid)
    assert rss_kib < 400 * 1024, f"RSS {rss_kib} KiB after a 50 MB body"


def test_a_body_over_one_megabyte_is_refused_even_with_the_token(daemon: DaemonProcess) -> None:
    response = daemon.post(
        "/api/v1/baselines/core/vendor",
        content=b"{" + b" " * (1024 * 1024 + 1) + b"}",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "1 MB" in response.json()["detail"]


def test_authentication_comes_before_the_body_is_parsed(daemon: DaemonProcess) -> None:
    response = daemon.post(
        "/api/v1/baselines/core/vendor",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 401  # not 422: the body was never looked at


@pytest.mark.parametrize(
    "header",
    [ADMIN_TOKEN, f"bearer{ADMIN_TOKEN}", f"Token {ADMIN_TOKEN}", f"Bearer {ADMIN_TOKEN}x", ""],
)
def test_only_an_exact_bearer_token_is_accepted(daemon: DaemonProcess, header: str) -> None:
    headers = {"Authorization": header} if header else {}
    assert daemon.post("/-/reload", headers=headers).status_code == 401
    assert daemon.post("/api/v1/baselines/core/vendor", headers=headers).status_code == 401


def test_reload_needs_the_admin_token(daemon: DaemonProcess) -> None:
    assert daemon.post("/-/reload").status_code == 401
    accepted = daemon.post("/-/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert accepted.status_code == 200, accepted.text


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
