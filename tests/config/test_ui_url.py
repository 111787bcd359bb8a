"""``ui_url:``, the address people open the web pages at, and ``runbook_base_url:``, where
alerts link their runbooks: validated, and set from the env."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config import ENV, VALID, problems_of, write

from ragcanary.suites.loaded import load_config


def test_ui_url_is_unset_by_default(tmp_path: Path) -> None:
    assert load_config(write(tmp_path), ENV).config.ui_url is None


def test_ui_url_loses_its_trailing_slash_so_links_join_cleanly(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "ui_url: https://canary.example.com/ragcanary/\n")
    assert load_config(path, ENV).config.ui_url == "https://canary.example.com/ragcanary"


def test_the_environment_sets_ui_url(tmp_path: Path) -> None:
    environ = {**ENV, "RAGCANARY_UI_URL": "http://10.0.0.5:9464"}
    assert load_config(write(tmp_path), environ).config.ui_url == "http://10.0.0.5:9464"


@pytest.mark.parametrize("url", ["canary.example.com", "ftp://canary.example.com", "https://"])
def test_a_ui_url_that_is_not_an_http_base_is_a_located_problem(tmp_path: Path, url: str) -> None:
    (problem,) = problems_of(write(tmp_path, VALID + f"ui_url: {url}\n"))
    assert problem.path == "ui_url"
    assert "http(s) base URL" in problem.message
    assert "https://ragcanary.example.com" in problem.fix


def test_runbook_base_url_is_unset_by_default_and_set_like_ui_url(tmp_path: Path) -> None:
    assert load_config(write(tmp_path), ENV).config.runbook_base_url is None
    path = write(tmp_path, VALID + "runbook_base_url: https://wiki.example.com/runbooks/\n")
    assert load_config(path, ENV).config.runbook_base_url == "https://wiki.example.com/runbooks"
    environ = {**ENV, "RAGCANARY_RUNBOOK_BASE_URL": "https://wiki.example.com/rc"}
    assert load_config(write(tmp_path), environ).config.runbook_base_url == (
        "https://wiki.example.com/rc"
    )


@pytest.mark.parametrize("url", ["wiki.example.com/runbooks", "file:///srv/runbooks", "https://"])
def test_a_runbook_base_url_that_is_not_an_http_base_is_a_located_problem(
    tmp_path: Path, url: str
) -> None:
    (problem,) = problems_of(write(tmp_path, VALID + f"runbook_base_url: {url}\n"))
    assert problem.path == "runbook_base_url"
    assert "http(s) base URL" in problem.message
