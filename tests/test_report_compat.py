"""Reports written and stored before the typed report read back equal (tests/data/reports).

The run report became a typed class (``measure.run_report``) with its JSON in one module
(``measure.report_json``); what users already have must not change: a ``--report`` file is
written byte for byte as before, a stored run reads back equal from a database written by the
old code, and stored again (SQLite, PostgreSQL) it is answered equal.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.report import dump_text
from ragcanary.serve.http.api import create_app
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig, load_config

DATA = Path(__file__).parent / "data" / "reports"
CLI = sorted(DATA.glob("cli-*.json"))
STORED = sorted(DATA.glob("daemon-*.json"))


def ordered(value: Any) -> str:
    """``value`` as JSON text with its keys in their order: equal only when the order is."""
    return json.dumps(value, ensure_ascii=False)


def test_the_captured_reports_are_there() -> None:
    assert [p.name for p in CLI] == ["cli-first.json", "cli-lost.json", "cli-resized.json"]
    assert len(STORED) == 4


@pytest.mark.parametrize("path", CLI + STORED, ids=lambda p: p.stem)
def test_a_report_reads_back_and_is_written_again_key_for_key(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert ordered(marshal(unmarshal(data))) == ordered(data)


@pytest.mark.parametrize("path", CLI, ids=lambda p: p.stem)
def test_a_report_file_is_written_byte_for_byte_as_before(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert dump_text([unmarshal(json.loads(text))]) == text


def test_runs_stored_by_the_old_code_read_back_equal(tmp_path: Path) -> None:
    """The database the old daemon wrote, read by today's store."""
    db = tmp_path / "old.db"
    shutil.copyfile(DATA / "stored-by-d5d22b1.db", db)
    with Store.from_url(f"sqlite:///{db}") as store:
        store.migrate()  # as the daemon does at start: the previous release wrote it (version 6)
        for path in DATA.glob("daemon-sqlite-*.json"):
            data = json.loads(path.read_text(encoding="utf-8"))
            report = store.get_report(data["run_id"])
            assert report is not None
            assert ordered(marshal(report)) == ordered(data)


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_a_captured_run_stored_again_reads_back_equal(store: Store, path: Path) -> None:
    """On SQLite key for key; PostgreSQL's answer is compared as JSON values."""
    data = json.loads(path.read_text(encoding="utf-8"))
    report = unmarshal(data)
    store.save_run(report)
    back = store.get_report(report.run_id)
    assert back == report
    assert marshal(back) == data
    if store.dialect == "sqlite":
        assert ordered(marshal(back)) == ordered(data)


class _StoredRuns:
    """The part of ``serve.service.Service`` that ``GET /api/v1/runs/{id}`` uses."""

    def __init__(self, store: Store, loaded: LoadedConfig) -> None:
        self._store, self.loaded = store, loaded

    def resolve_run(self, given: str) -> str:
        return given

    def report(self, run_id: str) -> RunReport | None:
        return self._store.get_report(run_id)


@pytest.mark.anyio
async def test_the_api_answers_a_stored_run_byte_for_byte_as_before(tmp_path: Path) -> None:
    """What FastAPI wrote for the old report dict: compact JSON, keys in the stored order."""
    config = tmp_path / "ragcanary.yaml"
    config.write_text(
        "storage: sqlite:///unused.db\n"
        "targets: {t: {url: 'http://t.test/search', params: {q: '{query}'}}}\n",
        encoding="utf-8",
    )
    db = tmp_path / "old.db"
    shutil.copyfile(DATA / "stored-by-d5d22b1.db", db)
    with Store.from_url(f"sqlite:///{db}") as store:
        store.migrate()
        app = create_app(cast(Any, _StoredRuns(store, load_config(config, {}))))
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for path in DATA.glob("daemon-sqlite-*.json"):
                data = json.loads(path.read_text(encoding="utf-8"))
                answer = await client.get(f"/api/v1/runs/{data['run_id']}")
                assert answer.status_code == 200
                expected = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                assert answer.content == expected.encode("utf-8")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
