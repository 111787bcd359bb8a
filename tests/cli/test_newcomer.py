"""What a newcomer types first: outputs into new folders, busy ports, help, the demo banner."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import free_port
from typer.testing import CliRunner

from ragcanary.cli.app import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def _config(tmp_path: Path, listen: str) -> Path:
    (tmp_path / "suite.yaml").write_text('cases: [{id: a, query: "q", relevant: [x]}]\n')
    config = tmp_path / "ragcanary.yaml"
    config.write_text(
        f"storage: sqlite:///{tmp_path / 'r.db'}\nlisten: {listen}\n"
        "targets: {t: {url: 'http://127.0.0.1:9/s', body: {q: '{query}'}}}\n"
        "suites: {s: {cases: suite.yaml, targets: [t]}}\n"
    )
    return config


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragcanary", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_serve_on_a_busy_port_exits_2_naming_it_before_anything_starts(
    tmp_path: Path, busy_port: int
) -> None:
    config = _config(tmp_path, f"127.0.0.1:{busy_port}")
    done = _serve("-c", str(config), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    expected = f"address 127.0.0.1:{busy_port} is in use (set listen: or --listen)"
    assert expected in done.stderr
    assert "started" not in done.stdout + done.stderr


def test_serve_listen_overrides_the_config(tmp_path: Path, busy_port: int) -> None:
    config = _config(tmp_path, f"127.0.0.1:{free_port()}")
    done = _serve("-c", str(config), "--listen", f"127.0.0.1:{busy_port}", cwd=tmp_path)
    assert done.returncode == 2
    assert f"address 127.0.0.1:{busy_port} is in use" in done.stderr
    bad = _serve("-c", str(config), "--listen", "nowhere", cwd=tmp_path)
    assert bad.returncode == 2
    assert "RAGCANARY_LISTEN" in bad.stderr or "listen" in bad.stderr


def test_demo_on_a_busy_port_exits_2(tmp_path: Path, busy_port: int) -> None:
    result = CliRunner().invoke(
        app,
        ["demo", "--port", "0", "--listen", f"127.0.0.1:{busy_port}", "--workdir", str(tmp_path)],
    )
    assert result.exit_code == 2
    assert f"address 127.0.0.1:{busy_port} is in use" in result.stderr


@pytest.mark.e2e  # the run asks 127.0.0.1:9, where nothing listens
def test_run_writes_outputs_into_folders_that_do_not_exist_yet(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:9464")
    out = tmp_path / "out" / "nested"
    args = ["run", "-c", str(config), "--report", str(out / "report.json")]
    args += ["--junit", str(out / "junit.xml"), "--markdown", str(out / "summary.md")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output  # the target is unreachable: unavailable
    assert {p.name for p in out.iterdir()} == {"report.json", "junit.xml", "summary.md"}


@pytest.mark.e2e  # the run asks 127.0.0.1:9, where nothing listens
def test_an_unwritable_output_is_a_usage_error_not_the_gate(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:9464")
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(
        app, ["run", "-c", str(config), "--report", str(tmp_path / "file" / "report.json")]
    )
    assert result.exit_code == 2
    assert "--report" in result.stderr
    assert "cannot write it" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["run"], ["demo"], ["serve"], ["diff"], ["history"], ["runs"], ["baseline", "show"]],
)
def test_help_shows_flags_as_flags(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "<bool>" not in result.output


def test_demo_banner_command_is_the_readme_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (documented,) = re.findall(r"^\.venv/bin/ragcanary diff .*$", readme, re.MULTILINE)
    source = (ROOT / "src" / "ragcanary" / "cli" / "serving.py").read_text(encoding="utf-8")
    banner = re.search(r"\{cli\} (diff -c \{path\} [^\n]*)", source)
    assert banner is not None
    rendered = banner.group(1).replace("{path}", "ragcanary-demo/ragcanary.yaml")
    assert documented == f".venv/bin/ragcanary {rendered}"


def test_the_demo_folder_is_ignored_by_git() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "ragcanary-demo/ragcanary.db"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0
