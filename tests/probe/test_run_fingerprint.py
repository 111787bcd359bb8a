"""A probed run's fingerprint: the config's hashes, its vectors' length, and the index's count
when it tells it; an index that cannot say is logged once and never fails the run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import answer, case
from structlog.testing import capture_logs

from ragcanary.measure.fingerprint import IndexState
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.run_fingerprint import with_fingerprint
from ragcanary.suites.fingerprint import config_hash
from ragcanary.suites.loaded import LoadedConfig, load_config

pytestmark = pytest.mark.anyio
TOKEN = "idx-secret-7f3"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Index:
    """A target whose index answers ``told`` about itself, or raises ``failure``."""

    def __init__(self, told: IndexState | None = None, failure: Exception | None = None):
        self.told, self.failure = told, failure

    async def index_state(self) -> IndexState:
        if self.failure is not None:
            raise self.failure
        return self.told or IndexState()


def loaded(directory: Path) -> LoadedConfig:
    (directory / "core.yaml").write_text("cases:\n  - {id: c1, query: q, relevant: [d]}\n")
    (directory / "ragcanary.yaml").write_text(
        "embeddings:\n  toy: {url: 'http://127.0.0.1:9/v1/embeddings', model: toy-1}\n"
        "targets:\n  docs: {url: 'http://127.0.0.1:9/s', body: {q: '{query}'}, embedding: toy,\n"
        "    headers: {Authorization: 'Bearer ${TOKEN}'}}\n"
        "suites:\n  core: {cases: core.yaml, targets: [docs]}\n"
    )
    return load_config(directory / "ragcanary.yaml", {"TOKEN": TOKEN})


def probed(vector: tuple[float, ...] | None) -> RunResult:
    result = CaseResult(case("c1", relevant={"d": 1}), answer(["d"]), vector)
    return RunResult("core", "docs", "r1", datetime(2026, 11, 28, tzinfo=UTC), 0.1, (result,))


async def test_the_run_carries_its_hashes_vector_length_and_the_index_s_count(
    tmp_path: Path,
) -> None:
    config = loaded(tmp_path)
    index = Index(IndexState(40, {"hnsw.space": "cosine"}))
    run = await with_fingerprint(config, "core", "docs", index, probed((0.1, 0.2, 0.3)), set())  # type: ignore[arg-type]
    found = run.fingerprint
    assert found is not None
    assert found.config_hash == config_hash(config)
    assert (found.embedding_model, found.embedding_dimensions) == ("toy-1", 3)
    assert (found.documents, found.index_settings) == (40, {"hnsw.space": "cosine"})


async def test_an_index_that_cannot_say_is_logged_once_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    config = loaded(tmp_path)
    failing = Index(failure=QueryFailed("http_5xx", f"HTTP 503 (token {TOKEN})"))
    untold: set[str] = set()
    with capture_logs() as logs:
        for _ in range(3):
            run = await with_fingerprint(config, "core", "docs", failing, probed(None), untold)  # type: ignore[arg-type]
            assert run.fingerprint is not None
            assert (run.fingerprint.documents, run.fingerprint.embedding_dimensions) == (None, None)
    warned = [e for e in logs if e["event"] == "index_count_unavailable"]
    assert len(warned) == 1
    assert warned[0]["target"] == "docs"
    assert TOKEN not in warned[0]["reason"]
    assert "HTTP 503" in warned[0]["reason"]
    with capture_logs() as logs:  # it answers again, then fails again: that is news
        await with_fingerprint(config, "core", "docs", Index(IndexState(5)), probed(None), untold)  # type: ignore[arg-type]
        await with_fingerprint(
            config, "core", "docs", Index(failure=RuntimeError("bug")), probed(None), untold
        )  # type: ignore[arg-type]
    assert [e["reason"] for e in logs if e["event"] == "index_count_unavailable"] == [
        "RuntimeError: bug"
    ]
