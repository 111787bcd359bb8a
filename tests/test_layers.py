"""The wings' import contracts hold, and fail when a wing imports upwards or measure/ does I/O."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
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
        # measure/ is the ground floor: the case model lives in it, not beside the loader.
        ("measure/cases.py", "import ragcanary.suites.suite", "Wings import only"),
        ("measure/cases.py", "import yaml", "The pure core does no I/O"),
        ("measure/results.py", "import pydantic", "The pure core does no I/O"),
        ("measure/stale.py", "import ragcanary.redact", "imports only errors"),
        # probe/ and store/ share a floor and never import each other.
        ("store/keeper.py", "import ragcanary.probe.runner", "Wings import only"),
        ("probe/runner.py", "import ragcanary.store.keeper", "Wings import only"),
        ("serve/schedule/jobs.py", "import ragcanary.serve.replicas.claims", "serve's rooms"),
        ("serve/metrics/exporter.py", "import ragcanary.serve.http.api", "serve's rooms"),
    ],
)
def test_an_import_against_the_layers_fails_the_build(
    copy: Path, module: str, line: str, broken: str
) -> None:
    _insert(copy, module, line)
    done = _lint(copy)
    assert done.returncode != 0, done.stdout
    assert f"{broken}" in done.stdout
    assert "BROKEN" in done.stdout


def test_measure_reaches_no_io_library_through_another_module_either(copy: Path) -> None:
    _insert(copy, "errors.py", "import socket")  # errors is the one module measure may import
    _insert(copy, "measure/metrics.py", "import ragcanary.errors")
    done = _lint(copy)
    assert done.returncode != 0, done.stdout
    assert "The pure core does no I/O BROKEN" in done.stdout
    assert "ragcanary.errors -> socket" in done.stdout


def test_no_contract_lets_an_import_through_another_module_pass() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    assert contracts
    assert [c["name"] for c in contracts if c.get("allow_indirect_imports")] == []


def _insert(copy: Path, module: str, line: str) -> None:
    """Put ``line`` among the imports of ``module`` in the copy of the package."""
    path = copy / "ragcanary" / module
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition("from __future__ import annotations\n")
    assert rest, f"{module} has no 'from __future__ import annotations' to insert after"
    path.write_text(f"{head}from __future__ import annotations\n\n{line}\n{rest}", encoding="utf-8")
