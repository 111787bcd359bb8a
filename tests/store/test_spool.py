"""The spool file on a real filesystem: what it holds, and links it must not follow."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from test_storage import NOW, make_report

from ragcanary.store.spool import Spool


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "ragcanary.db.spool.jsonl")


def _entries(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def _run_ids(spool: Spool) -> list[str]:
    reports, unreadable = spool.read()
    assert unreadable == 0
    return [r["run_id"] for r in reports]


def test_the_spool_holds_what_replace_wrote(spool: Spool) -> None:
    reports = [make_report("r1", NOW), make_report("r2", NOW, case_ids=("ünï",))]
    spool.replace(reports)
    assert spool.read() == (reports, 0)
    assert stat.S_IMODE(spool.path.stat().st_mode) == 0o600
    assert _entries(spool.path.parent) == {spool.path.name}  # no temporary file or directory
    spool.replace([])
    assert not spool.path.exists()


def test_a_link_planted_as_the_temporary_file_is_not_followed(spool: Spool, tmp_path: Path) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n", encoding="utf-8")
    planted = spool.path.with_name(spool.path.name + ".tmp")
    planted.symlink_to(victim)
    spool.replace([make_report("r1", NOW)])
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert planted.is_symlink()
    assert _run_ids(spool) == ["r1"]


def test_a_link_planted_as_the_spool_is_replaced_not_followed(spool: Spool, tmp_path: Path) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n", encoding="utf-8")
    spool.path.symlink_to(victim)
    spool.replace([make_report("r1", NOW)])
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not spool.path.is_symlink()
    assert _run_ids(spool) == ["r1"]
