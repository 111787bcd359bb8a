"""A real Prometheus server for tests: temp config and rules, 1s scrapes and evaluations."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from daemon_harness import POLL_S, free_port, wait_for

T = TypeVar("T")

REQUIRE_ENV = "RAGCANARY_REQUIRE_PROMETHEUS"
START_TIMEOUT_S = 30.0
JOB = "ragcanary"  # the scrape job of deploy/prometheus/prometheus.yml


def prometheus_binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; skips the test when it is not installed.

    With RAGCANARY_REQUIRE_PROMETHEUS=1 (set by .ci/run) a missing binary fails the test
    instead, so CI never passes by skipping.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not on PATH; install Debian's prometheus package to run this test"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 forbids skipping)")
    pytest.skip(reason)


class PrometheusServer:
    """``prometheus`` on 127.0.0.1, scraping ``targets`` as job ``ragcanary`` with ``rule_files``.

    Scrapes and rule evaluations run every second, so an alert with ``for: 1s`` goes from
    a changed gauge to firing in a few seconds. Everything lives in ``directory``; the
    server's own log is ``directory/prometheus.log`` and its tail is shown on every timeout.
    """

    def __init__(
        self,
        directory: Path,
        targets: Sequence[str],
        rule_files: Sequence[Path] = (),
        *,
        interval: str = "1s",
    ) -> None:
        self.directory = directory
        self.targets = list(targets)
        self.rule_files = list(rule_files)
        self.interval = interval
        self.port = free_port()
        self.log_file = directory / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._client = httpx.Client(base_url=self.url, timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": self.targets}]}],
        }
        path = self.directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def start(self) -> PrometheusServer:
        """Start the server and wait until it reports ready (config and rules loaded)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.write_config()
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    prometheus_binary("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def ready() -> bool:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            return self._client.get("/-/ready").status_code == 200

        self.wait_for(ready, START_TIMEOUT_S, "Prometheus to be ready")
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 15 seconds."""
        self._client.close()
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_for(self, check: Callable[[], T], timeout: float, what: str) -> T:
        """``daemon_harness.wait_for``, with the tail of Prometheus's log when it times out."""
        try:
            return wait_for(check, timeout, what)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\n--- prometheus log (tail) ---\n{self.log_tail()}"
            ) from None

    def watch(self, seconds: float, seen: set[str]) -> None:
        """Poll the active alerts for ``seconds``, adding every alert name seen to ``seen``.

        For claims that something must *not* happen during a period: the caller asserts on
        ``seen`` afterwards, with everything that was active at any poll.
        """
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            seen.update(self.active())
            time.sleep(POLL_S)

    # -- HTTP API ------------------------------------------------------------------------

    def api(self, path: str, **params: Any) -> Any:
        """The ``data`` of ``GET /api/v1/<path>``; fails with Prometheus's error message."""
        response = self._client.get(f"/api/v1/{path}", params=params)
        body = response.json()
        assert body.get("status") == "success", f"/api/v1/{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", f"{expr!r} is not an instant vector: {data}"
        return list(data["result"])

    def query_range(
        self, expr: str, start: float, end: float, step: float = 1.0
    ) -> list[dict[str, Any]]:
        """The range matrix of ``expr`` (``[{"metric": {...}, "values": [[t, "v"], ...]}]``)."""
        data = self.api("query_range", query=expr, start=start, end=end, step=step)
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """The pending and firing alerts, each with ``labels``, ``state`` and ``annotations``."""
        return list(self.api("alerts")["alerts"])

    def active(self) -> dict[str, str]:
        """Alert name -> state (``firing`` wins over ``pending``) of the active alerts."""
        states: dict[str, str] = {}
        for alert in self.alerts():
            name = alert["labels"]["alertname"]
            if states.get(name) != "firing":
                states[name] = alert["state"]
        return states

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule (recording and alerting) with its health and last error."""
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def targets_up(self) -> bool:
        """Whether every scrape target answered its last scrape."""
        active = self.api("targets")["activeTargets"]
        return bool(active) and all(target["health"] == "up" for target in active)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
