"""The wings' import contracts hold, and fail when a wing imports upwards or measure/ does I/O."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package to break, imported instead of the real one."""
    shutil.copytree(ROOT / "src" / "ragcanary", tmp_path / "ragcanary")
    return tmp_path


def test_the_package_keeps_every_contract() -> None:
    done = _lint(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("measure/metrics.py", "import httpx", "The pure core does no I/O"),
        ("probe/runner.py", "import ragcanary.serve.metrics.exporter", "Wings import only"),
        ("config/units.py", "import ragcanary.suites.suite", "Wings import only"),
        ("serve/http/api.py", "import ragcanary.serve.daemon", "narrow protocol"),
        ("serve/http/api.py", "import ragcanary.serve.metrics.exporter", "narrow protocol"),
        ("serve/http/ui/stalepage.py", "import ragcanary.store.storage", "narrow protocol"),
        # Indirect: the store's readers and the intake's queue reach the store themselves.
        ("serve/http/ui/views.py", "import ragcanary.store.overview", "narrow protocol"),
        ("serve/http/ui/pages.py", "import ragcanary.serve.intake.queue", "narrow protocol"),
        ("measure/evaluation.py", "import ragcanary.config.model", "plain settings"),
        ("serve/schedule/jobs.py", "import ragcanary.serve.replicas.claims", "serve's rooms"),
        ("serve/metrics/exporter.py", "import ragcanary.serve.http.api", "serve's rooms"),
    ],
)
def test_an_import_against_the_layers_fails_the_build(
    copy: Path, module: str, line: str, broken: str
) -> None:
    path = copy / "ragcanary" / module
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition("from __future__ import annotations\n")
    path.write_text(f"{head}from __future__ import annotations\n\n{line}\n{rest}", encoding="utf-8")
    done = _lint(copy)
    assert done.returncode != 0, done.stdout
    assert f"{broken}" in done.stdout
    assert "BROKEN" in done.stdout
