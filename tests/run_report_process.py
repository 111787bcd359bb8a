"""`ragcanary run` as CI runs it, in a process of its own, and what it printed and wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Ran:
    """One `ragcanary run`: its exit code, what it printed (standard output, then standard
    error), and the report it wrote."""

    code: int
    stdout: str
    stderr: str
    report: dict[str, Any]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def line_after_verdict(self) -> str:
        """The line `ragcanary run` printed under its verdict line, on standard output."""
        lines = self.stdout.splitlines()
        verdicts = [n for n, line in enumerate(lines) if line.startswith(("PASS ", "REGRESSION "))]
        assert len(verdicts) == 1, self.output
        return lines[verdicts[0] + 1]

    def case(self, case_id: str) -> dict[str, Any]:
        return next(case for case in self.report["cases"] if case["id"] == case_id)

    def lost_failures(self) -> list[dict[str, Any]]:
        return [f for f in self.report["failures"] if f["kind"] == "lost_document"]


def run_with_report(config: Path, report: str, *extra: str, timeout: float) -> Ran:
    """`ragcanary run -c CONFIG --report REPORT ...` in the config's folder; wide, so no line
    wraps. The report must have been written, whatever the exit code."""
    done = subprocess.run(
        [sys.executable, "-m", "ragcanary", "run", "-c", str(config), "--report", report, *extra],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    path = config.parent / report
    said = done.stdout + done.stderr
    assert path.is_file(), f"no report written (exit {done.returncode}):\n{said}"
    return Ran(done.returncode, done.stdout, done.stderr, json.loads(path.read_text("utf-8")))
