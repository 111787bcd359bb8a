"""Driving `ragcanary serve` as a subprocess in tests: ports, deadlines, scrapes and a TCP proxy."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from retrievers import target_entry

from ragcanary.serve.daemon import Daemon
from ragcanary.suites.loaded import load_config

T = TypeVar("T")

POLL_S = 0.05
START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], T], timeout: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds.

    ``check`` may raise AssertionError or httpx errors while the condition does not hold yet;
    the last one is shown when the deadline passes.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = check()
        except (AssertionError, httpx.HTTPError) as exc:
            last = exc
        else:
            if result:
                return result
            last = result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")
        time.sleep(POLL_S)


def parse_metrics(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


@dataclass(frozen=True)
class Scrape:
    """One scrape of /metrics: the raw text and its parsed samples."""

    text: str
    samples: list[Sample]

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample called ``name`` whose labels include ``labels``."""
        found = [
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert len(found) <= 1, f"{name}{labels} matches {len(found)} samples"
        return found[0] if found else None

    def number(self, name: str, **labels: str) -> float:
        """Like ``value``, failing when there is no such sample."""
        value = self.value(name, **labels)
        assert value is not None, f"no sample {name}{labels}"
        return value

    def total(self, name: str, **labels: str) -> float:
        """The sum of every sample called ``name`` whose labels include ``labels``."""
        return sum(
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    def label_values(self, name: str, label: str) -> set[str]:
        """The values ``label`` takes across the samples called ``name``."""
        return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}


@dataclass
class DaemonProcess:
    """One `python -m ragcanary serve -c CONFIG` subprocess, its output and its HTTP API."""

    config: Path
    port: int
    env: Mapping[str, str]
    # Open files the daemon may have: its soft and hard limits (``prlimit``); None inherits ours.
    files: tuple[int, int] | None = None
    # More arguments of `serve` after ``-c CONFIG``, e.g. ``("--listen", "127.0.0.1:9464")``.
    args: tuple[str, ...] = ()
    output: list[str] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = field(default=None, repr=False)
    _readers: list[threading.Thread] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def started(self) -> bool:
        return self._process is not None

    @property
    def process(self) -> subprocess.Popen[str]:
        assert self._process is not None, "start the daemon first"
        return self._process

    def start(self) -> DaemonProcess:
        """Start the daemon and wait until /healthz answers."""
        # The developer's own RAGCANARY_* settings would override the test's config.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
        env = {**inherited, **self.env}
        command = [sys.executable, "-m", "ragcanary", "serve", "-c", str(self.config)]
        command += self.args
        if self.files is not None:
            command = ["prlimit", f"--nofile={self.files[0]}:{self.files[1]}", "--", *command]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.config.parent,
        )
        for stream in (self._process.stdout, self._process.stderr):
            reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
            reader.start()
            self._readers.append(reader)

        def healthy() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.process.returncode}:\n{self.log}")
            return self.get("/healthz").status_code == 200

        wait_for(healthy, START_TIMEOUT_S, "the daemon to answer /healthz")
        return self

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._lock:
                self.output.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        with self._lock:
            return "\n".join(self.output)

    def events(self) -> list[dict[str, Any]]:
        """The log lines so far, parsed; a line that is not a JSON object fails the test."""
        with self._lock:
            lines = list(self.output)
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                raise AssertionError(f"log line is not JSON: {line!r}") from None
            assert isinstance(event, dict), f"log line is not a JSON object: {line!r}"
            events.append(event)
        return events

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, timeout=10)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, timeout=10, **kwargs)

    def scrape(self) -> Scrape:
        response = self.get("/metrics")
        assert response.status_code == 200, response.text
        return Scrape(response.text, parse_metrics(response.text))

    def runs_total(self, suite: str, target: str, outcome: str | None = None) -> float:
        labels = {"suite": suite, "target": target}
        if outcome is not None:
            labels["outcome"] = outcome
        return self.scrape().total("ragcanary_runs_total", **labels)

    def wait_runs(
        self, suite: str, target: str, more: int, timeout: float, outcome: str | None = None
    ) -> Scrape:
        """Wait until ``more`` runs (of ``outcome``, if any) finish from now; the scrape then."""
        start = self.runs_total(suite, target, outcome)

        def grown() -> Scrape | None:
            scrape = self.scrape()
            labels = {"suite": suite, "target": target}
            if outcome is not None:
                labels["outcome"] = outcome
            done = scrape.total("ragcanary_runs_total", **labels) >= start + more
            return scrape if done else None

        scrape = wait_for(grown, timeout, f"{more} more {outcome or ''} runs of {suite}/{target}")
        assert scrape is not None
        return scrape

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> tuple[int, float]:
        """SIGTERM and wait; the exit code and the seconds it took."""
        started = time.monotonic()
        self.signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        elapsed = time.monotonic() - started
        self._close()
        return code, elapsed

    def kill(self) -> None:
        """Make sure the process is gone and its pipes closed (teardown after a failed test)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        for reader in self._readers:
            reader.join(timeout=5)
        if self._process is not None:
            for stream in (self._process.stdout, self._process.stderr):
                if stream is not None:
                    stream.close()


class TcpProxy:
    """A threaded TCP relay on 127.0.0.1 to ``upstream``, to cut a connection off and restore it.

    ``stop`` closes the listener and every relayed connection, so clients see both their
    live connections dropped and new ones refused; ``start`` listens again on the same port.
    """

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self.port = port
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(POLL_S)  # so the accept loop notices stop() promptly
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stopped.clear()
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            doomed, self._sockets = self._sockets, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            server.settimeout(None)
            with self._lock:
                if self._stopped.is_set():
                    client.close()
                    server.close()
                    return
                self._sockets.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running(daemon: DaemonProcess) -> Iterator[DaemonProcess]:
    """Start ``daemon``; on the way out stop it, killing it if it does not stop."""
    daemon.start()
    try:
        yield daemon
    finally:
        if daemon.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.stop(timeout=30)
        daemon.kill()


class _PlainDumper(yaml.SafeDumper):
    """``yaml.safe_dump`` without anchors: ragcanary refuses YAML aliases (docs/config.md)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def config_yaml(data: Any) -> str:
    """``data`` as a config file: a value used twice is written out twice, never aliased."""
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False)


@contextlib.contextmanager
def packets_dropped(port: int) -> Iterator[None]:
    """Silently drop every TCP packet to 127.0.0.1:``port`` (a network partition), with iptables.

    Connections then hang instead of failing: sent data is never acknowledged and new ones
    never complete. Needs root and iptables; skips without them unless CI requires them.
    """
    import pytest

    rule = ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    try:
        subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = f"cannot drop packets with iptables ({exc}); install iptables and run as root"
        if os.environ.get("RAGCANARY_REQUIRE_IPTABLES") == "1":
            pytest.fail(f"{reason} (RAGCANARY_REQUIRE_IPTABLES=1 forbids skipping)")
        pytest.skip(reason)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True, capture_output=True, timeout=10)


def idle_replica(directory: Path, storage: str) -> Daemon:
    """A daemon, not started, of one suite (``core``, every minute) on one target (``vendor``)
    that nobody answers: for what a daemon does between runs (on PostgreSQL, as a replica)."""
    (directory / "cases.yaml").write_text(
        json.dumps({"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}), encoding="utf-8"
    )
    path = directory / "ragcanary.yaml"
    config = {
        "storage": storage,
        "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query")},
        "suites": {"core": {"cases": "cases.yaml", "targets": ["vendor"], "every": "1m"}},
    }
    path.write_text(config_yaml(config), encoding="utf-8")
    environ = {"VENDOR_KEY": "sk-idle-replica-31"}
    return Daemon(path, environ, load_config(path, environ))
