"""Servers the tests run as processes of their own: a free port, a log file, readiness polled."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """``argv`` started at once with its output in ``log``; ready when ``ready_url`` answers 200.

    Start several, then ``wait_ready`` each, so that their start-ups overlap.
    """

    def __init__(
        self,
        argv: Sequence[str],
        ready_url: str,
        log: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.ready_url = ready_url
        self._log_path = log
        self._log = log.open("w")
        self._process = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )

    def wait_ready(self, within_s: float) -> None:
        """Poll ``ready_url`` until it answers 200; fail with the log if the process exits."""
        deadline = time.monotonic() + within_s
        while True:
            if self._process.poll() is not None:
                raise AssertionError(
                    f"{self._process.args} exited with {self._process.returncode}:\n"
                    + self._log_path.read_text(errors="replace")[-4000:]
                )
            try:
                if httpx.get(self.ready_url, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.ready_url} did not answer within {within_s:g} s:\n"
                    + self._log_path.read_text(errors="replace")[-4000:]
                )
            time.sleep(0.1)  # the poll interval, not a wait for readiness

    def stop(self) -> None:
        """Terminate the process (kill it if it lingers) and close its log."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._log.close()
