"""`ragcanary storage stats`: what a store holds and its bytes, read without the retrievers'
secrets and without creating, upgrading or writing anything."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy
from factories import case_entry, run_report
from retrievers import target_entry
from rich.console import Console
from typer.testing import CliRunner
from version6 import write_version6

from ragcanary.cli.app import app
from ragcanary.cli.stored import print_footprint
from ragcanary.store.footprint import Footprint
from ragcanary.store.migrations import UPGRADES, latest_version
from ragcanary.store.schema import metadata
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
OVERRIDES = [f"RAGCANARY_{name}" for name in ("STORAGE", "CONFIG", "LISTEN")]


def write_config(directory: Path, storage: str) -> Path:
    """A config on ``storage`` whose target's key (VENDOR_KEY) is never set."""
    suite = {"cases": [{"id": "alpha", "query": "a question", "relevant": ["alpha-doc"]}]}
    (directory / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    config = {
        "storage": storage,
        "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query")},
        "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"]}},
    }
    path = directory / "ragcanary.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def stats(config: Path, *args: str) -> Any:
    env: dict[str, str | None] = {"COLUMNS": "200", "VENDOR_KEY": None}
    env.update(dict.fromkeys(OVERRIDES))  # None unsets: the test's config must rule
    return CliRunner().invoke(app, ["storage", "stats", *args, "-c", str(config)], env=env)


def save_runs(url: str) -> None:
    """Three runs of two canaries 5 minutes apart; beta's ranking changes in the last: 3
    rankings in all."""
    with Store.from_url(url) as store:
        store.migrate()
        for number in range(3):
            entries = [
                case_entry(
                    case_id,
                    ids=[f"{case_id}-doc"] if (case_id, number) != ("beta", 2) else ["new"],
                    latency_s=0.01 * (number + 1),
                )
                for case_id in ("alpha", "beta")
            ]
            started = NOW + timedelta(minutes=5 * number)
            store.save_run(run_report(f"run-{number}", started_at=started, cases=entries))


def file_bytes(url: str) -> int:
    path = Path(sqlalchemy.make_url(url).database or "")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def test_json_gives_what_was_saved_and_the_bytes_it_takes(tmp_path: Path, store_url: str) -> None:
    save_runs(store_url)
    result = stats(write_config(tmp_path, store_url), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert (found["runs"], found["answers"], found["cases"], found["rankings"]) == (3, 6, 2, 3)
    assert found["oldest_started_at"] == NOW.isoformat()
    assert found["newest_started_at"] == (NOW + timedelta(minutes=10)).isoformat()
    assert set(found["table_bytes"]) == set(metadata.tables)
    assert all(size > 0 for size in found["table_bytes"].values())
    if found["backend"] == "sqlite":
        assert found["total_bytes"] == file_bytes(store_url)
    else:
        assert found["backend"] == "postgresql"
        assert found["total_bytes"] == sum(found["table_bytes"].values())
    assert found["bytes_per_answer"] == found["total_bytes"] / 6


def test_the_text_names_each_count_and_each_table(tmp_path: Path, sqlite_url: str) -> None:
    save_runs(sqlite_url)
    result = stats(write_config(tmp_path, sqlite_url))
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert f"storage {sqlite_url}" in lines
    assert "runs 3" in lines
    assert "canary-runs (answers) 6" in lines
    assert "cases answered 2" in lines
    assert "rankings 3" in lines
    assert "oldest run started 2026-11-22 12:00:00 UTC" in lines
    assert "newest run started 2026-11-22 12:10:00 UTC" in lines
    total = file_bytes(sqlite_url)
    assert any(line.startswith(f"total bytes (database and WAL) {total:,}") for line in lines)
    assert f"bytes per canary-run {total / 6:,.0f}" in lines
    assert "bytes per table, with its indexes" in lines
    tables = {line.split()[0] for line in lines[lines.index("bytes per table, with its indexes") :]}
    assert set(metadata.tables) <= tables


def test_a_store_never_created_is_refused_with_exit_2(tmp_path: Path, store_url: str) -> None:
    result = stats(write_config(tmp_path, store_url))
    assert result.exit_code == 2, result.output
    assert "`ragcanary serve` once" in result.stderr
    assert "Traceback" not in result.output
    with Store.from_url(store_url) as store:
        path = store.database_file
        if path is not None:
            assert not path.exists()  # the SQLite file was not created
        else:
            assert store.schema_version() is None


def test_an_older_schema_is_refused_with_exit_2_and_not_upgraded(
    tmp_path: Path, store_url: str
) -> None:
    write_version6(store_url, [run_report("old", started_at=NOW)])
    result = stats(write_config(tmp_path, store_url), "--json")
    assert result.exit_code == 2, result.output
    latest = latest_version(UPGRADES)
    assert f"schema version 6, older than this ragcanary's {latest}" in result.stderr
    assert "`ragcanary serve`" in result.stderr
    with Store.from_url(store_url) as store:
        assert store.schema_version() == 6


def test_without_dbstat_the_text_says_per_table_bytes_are_unavailable() -> None:
    found = Footprint("sqlite:///x.db", "sqlite", 0, 0, 0, 0, None, None, None, 8192, 12288)
    out = io.StringIO()
    print_footprint(found, Console(file=out, width=200), as_json=False)
    text = " ".join(out.getvalue().split())
    assert "bytes per table: unavailable" in text
    assert "database pages 8,192 (8.2 kB)" in text
    assert "bytes per canary-run -" in text
