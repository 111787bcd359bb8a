"""The spool file on a real filesystem: what a start cannot read, and links it must not follow."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from test_storage import NOW, make_report

from ragcanary.measure.report_json import marshal
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.spool import MAX_DEPTH, Skipped, Spool
from ragcanary.store.storage import Store

READ_WITHIN_S = 5.0


def _line(run_id: str) -> bytes:
    report = make_report(run_id, NOW, case_ids=("café",))
    return json.dumps(marshal(report), ensure_ascii=False).encode() + b"\n"


def _nested(depth: int) -> bytes:
    """A report line with a value of ``depth`` arrays nested in one another."""
    head = json.dumps(marshal(make_report("deep", NOW))).encode()[:-1]
    return head + b', "x": ' + b"[" * depth + b"]" * depth + b"}\n"


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "ragcanary.db.spool.jsonl")


def _entries(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_a_missing_spool_holds_nothing(spool: Spool) -> None:
    contents = spool.read()
    assert (contents.reports, contents.skipped) == ([], [])


def test_the_spool_holds_what_replace_wrote(spool: Spool) -> None:
    reports = [make_report("r1", NOW), make_report("r2", NOW, case_ids=("ünï",))]
    spool.replace(reports)
    contents = spool.read()
    assert (contents.reports, contents.skipped) == (reports, [])
    assert stat.S_IMODE(spool.path.stat().st_mode) == 0o600
    assert _entries(spool.path.parent) == {spool.path.name}  # no temporary file or directory
    spool.replace([])
    assert not spool.path.exists()


def test_a_report_with_text_utf_8_cannot_hold_is_spooled_and_read_back(spool: Spool) -> None:
    # A target may answer "\\ud800" in JSON: a lone surrogate, which storage keeps escaped.
    report = make_report("r1", NOW)
    first, second = report.cases
    report = dataclasses.replace(
        report, cases=(dataclasses.replace(first, ids=("doc-\ud800", "doc-é")), second)
    )
    spool.replace([report])
    contents = spool.read()
    assert (contents.reports, contents.skipped) == ([report], [])


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (_line("cut")[: _line("cut").index("é".encode()) + 1], "is not UTF-8 at byte"),
        (b"\xff\xfe not text\n", "is not UTF-8 at byte 1"),
        (_nested(100_000), "nested deeper than any report"),
        (_nested(MAX_DEPTH + 1), "nested deeper than any report"),
        (b'{"run_id": "half", "suite": \n', "is not JSON"),
        (b"[1, 2, 3]\n", "is not a run report"),
        (b'{"suite": "core"}\n', "is not a run report"),
        (b'{"run_id": 7}\n', "is not a run report"),
        (b'{"run_id": "r9", "suite": "core"}\n', "can be stored (report 'r9' has no target"),
    ],
    ids=[
        "cut inside a character",
        "not UTF-8",
        "nested too deep to decode",
        "nested deeper than a report",
        "not JSON",
        "a list",
        "no run id",
        "a run id that is no string",
        "a report storage refuses",
    ],
)
def test_an_unreadable_line_is_skipped_and_the_others_are_read(
    spool: Spool, bad: bytes, reason: str
) -> None:
    data = _line("r1") + bad.rstrip(b"\n") + b"\n" + _line("r2")
    spool.path.write_bytes(data)
    contents = spool.read()
    assert [r.run_id for r in contents.reports] == ["r1", "r2"]
    assert [s.line for s in contents.skipped] == [2]
    assert reason in contents.skipped[0].reason
    assert spool.path.read_bytes() == data  # reading changes nothing


def test_a_report_nested_as_deep_as_allowed_is_read(spool: Spool) -> None:
    # {"run_id", "x": [...]}: the object is one level, the arrays the others.
    spool.path.write_bytes(_nested(MAX_DEPTH - 1))
    contents = spool.read()
    assert ([r.run_id for r in contents.reports], contents.skipped) == (["deep"], [])


def test_a_spool_that_is_a_directory_is_skipped_whole(spool: Spool) -> None:
    spool.path.mkdir()
    contents = spool.read()
    assert contents.reports == []
    assert contents.skipped == [Skipped(None, "is a directory, not a file")]


def test_a_spool_that_is_a_link_is_not_read_through(spool: Spool, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(_line("r1"))
    spool.path.symlink_to(elsewhere)
    contents = spool.read()
    assert contents.reports == []
    assert [s.line for s in contents.skipped] == [None]
    assert "symbolic link" in contents.skipped[0].reason


def test_a_fifo_in_place_of_the_spool_does_not_block_the_start(spool: Spool) -> None:
    os.mkfifo(spool.path)
    with ThreadPoolExecutor(1) as pool:
        contents = pool.submit(spool.read).result(timeout=READ_WITHIN_S)
    assert contents.reports == []
    assert "not a regular file" in contents.skipped[0].reason


def test_unreadable_lines_are_kept_aside_and_the_spool_keeps_the_readable_runs(
    spool: Spool,
) -> None:
    data = _line("r1") + b"\xc3\n" + _line("r2")
    spool.path.write_bytes(data)
    kept = spool.set_aside(spool.read())
    assert kept.name == "ragcanary.db.spool.jsonl.bad"
    assert kept.read_bytes() == data
    contents = spool.read()  # what the next start finds, if this one dies before storing
    assert ([r.run_id for r in contents.reports], contents.skipped) == (["r1", "r2"], [])
    spool.path.write_bytes(b"\xc3\n")
    again = spool.set_aside(spool.read())
    assert again.name == "ragcanary.db.spool.jsonl.2.bad"  # the first is never overwritten
    assert kept.read_bytes() == data
    assert not spool.path.exists()  # nothing readable was left to spool


def test_a_directory_or_a_link_in_place_of_the_spool_is_renamed_aside(
    spool: Spool, tmp_path: Path
) -> None:
    spool.path.mkdir()
    (spool.path / "notes.txt").write_text("kept", encoding="utf-8")
    kept = spool.set_aside(spool.read())
    assert (kept / "notes.txt").read_text(encoding="utf-8") == "kept"
    assert not spool.path.exists()
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(_line("r1"))
    spool.path.symlink_to(elsewhere)
    kept = spool.set_aside(spool.read())
    assert kept.is_symlink()
    assert not os.path.lexists(spool.path)
    assert elsewhere.read_bytes() == _line("r1")


def test_a_link_planted_as_the_temporary_file_is_not_followed(spool: Spool, tmp_path: Path) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n", encoding="utf-8")
    planted = spool.path.with_name(spool.path.name + ".tmp")
    planted.symlink_to(victim)
    spool.replace([make_report("r1", NOW)])
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert planted.is_symlink()
    assert [r.run_id for r in spool.read().reports] == ["r1"]


def test_a_link_planted_as_the_spool_is_replaced_not_followed(spool: Spool, tmp_path: Path) -> None:
    victim = tmp_path / "victim.conf"
    victim.write_text("precious\n", encoding="utf-8")
    spool.path.symlink_to(victim)
    spool.replace([make_report("r1", NOW)])
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not spool.path.is_symlink()
    assert [r.run_id for r in spool.read().reports] == ["r1"]


@contextlib.contextmanager
def immutable_directory(directory: Path) -> Iterator[None]:
    """Nothing in ``directory`` can be renamed, linked or created, not even by root."""
    try:
        subprocess.run(["chattr", "+i", str(directory)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot make {directory} immutable with chattr: {exc}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=False, capture_output=True)


def test_a_spool_that_cannot_be_kept_aside_is_never_overwritten_nor_removed(
    spool: Spool,
) -> None:
    data = _line("r1") + b"\xc3\n"
    spool.path.write_bytes(data)
    with immutable_directory(spool.path.parent), pytest.raises(PermissionError):
        spool.set_aside(spool.read())
    with pytest.raises(OSError, match="could not be read nor kept aside"):
        spool.replace([make_report("r2", NOW)])
    spool.remove()
    assert spool.path.read_bytes() == data


def test_replaying_counts_and_logs_each_skipped_line_once_and_holds_the_rest(
    spool: Spool, sqlite_url: str
) -> None:
    spool.path.write_bytes(_line("r1") + b"\xc3\n" + _line("r2") + _nested(100_000))
    counted: list[str] = []
    keeper = RunKeeper(Store.from_url(sqlite_url), spool=spool, on_error=counted.append)
    with capture_logs() as logs:
        assert keeper.replay_spool() == 2
    assert counted == ["spool", "spool"]
    skipped = [e for e in logs if e["event"].startswith("spool line skipped")]
    assert [(e["line"], e["log_level"]) for e in skipped] == [(2, "error"), (4, "error")]
    assert "not UTF-8" in skipped[0]["reason"]
    assert "nested deeper" in skipped[1]["reason"]
    assert {e["kept_at"] for e in skipped} == {str(spool.path) + ".bad"}
    assert [r.run_id for r in keeper.writer.snapshot()] == ["r1", "r2"]
    assert [r.run_id for r in spool.read().reports] == ["r1", "r2"]
