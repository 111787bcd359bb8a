"""``allowed_hosts:``, the names the API and pages answer besides their own: stored as requests
are read, and an entry that names no host is a located problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config import ENV, VALID, problems_of, write

from ragcanary.suites.loaded import load_config


def test_allowed_hosts_is_empty_by_default(tmp_path: Path) -> None:
    assert load_config(write(tmp_path), ENV).config.allowed_hosts == []


@pytest.mark.parametrize(
    ("entry", "stored"),
    [
        ("Ragcanary.Example.COM.", "ragcanary.example.com"),
        (".svc.cluster.local", ".svc.cluster.local"),
        ("'[::1]'", "::1"),
        ("my_service", "my_service"),
        ("'*'", "*"),
    ],
)
def test_entries_are_stored_as_requests_are_read(tmp_path: Path, entry: str, stored: str) -> None:
    path = write(tmp_path, VALID + f"allowed_hosts: [ragcanary, {entry}]\n")
    assert load_config(path, ENV).config.allowed_hosts == ["ragcanary", stored]


@pytest.mark.parametrize(
    "entry",
    ["http://ragcanary.example.com", "ragcanary:9464", "a/b", "''", "'*.example.com'", "12"],
)
def test_an_entry_that_names_no_host_is_a_located_problem(tmp_path: Path, entry: str) -> None:
    path = write(tmp_path, VALID + f"allowed_hosts:\n  - ragcanary\n  - {entry}\n")
    (problem,) = problems_of(path)
    assert problem.path == "allowed_hosts[1]"
    assert "is not a host name" in problem.message
    assert ".svc.cluster.local" in problem.fix
    assert problem.line == len(VALID.splitlines()) + 3
