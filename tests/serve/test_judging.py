"""What keeps a run from holding up the daemon's event loop (and so its scrapes).

It judges runs in a thread, decodes each pair's baseline once per pin, and leaves nothing for
the garbage collector, whose passes hold every thread while they run.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from retrievers import FakeRetriever, target_entry

from ragcanary.measure.endpoints import EndpointRun
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import RunResult
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.serve.schedule.judging import Judge
from ragcanary.store.storage import Store
from ragcanary.suites.judge import judge_run
from ragcanary.suites.loaded import LoadedConfig, load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-vendor-61d0c2"
VENDOR = JobKey("core", "vendor")
SUITE = {
    "cases": [
        {"id": "password", "query": "reset password", "relevant": ["doc-7", "doc-2"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"]},
    ]
}
CONFIG = """\
storage: sqlite:///{db}
targets: {{vendor: {target}}}
suites:
  core:
    cases: core.yaml
    targets: [vendor]
    k: [1, 3]
    depth: 5
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(api_key=API_KEY) as fake:
        yield fake


@pytest.fixture
def config(tmp_path: Path, retriever: FakeRetriever) -> Path:
    (tmp_path / "core.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    target = json.dumps(target_entry(retriever.url, retries=0))
    path.write_text(CONFIG.format(db=tmp_path / "ragcanary.db", target=target), encoding="utf-8")
    return path


def _daemon(config: Path, judge: Judge | None = None) -> Daemon:
    environ = {"VENDOR_KEY": API_KEY}
    loaded = load_config(config, environ)
    daemon = Daemon(config, environ, loaded, judge=judge)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    return daemon


@pytest.fixture
async def daemon(config: Path) -> AsyncIterator[Daemon]:
    """A daemon never started: runs happen through ``run_now``."""
    daemon = _daemon(config)
    yield daemon
    await daemon.shutdown()


async def test_a_baseline_is_decoded_once_per_pin_and_again_for_another_suite(
    daemon: Daemon,
) -> None:
    judge, pair, suite = daemon.judge, ("core", "vendor"), daemon.loaded.suites["core"]
    first = await daemon.run_now(VENDOR)  # pinned as the first healthy run
    report = await daemon.keeper.baseline(pair, "pinned")
    assert report is not None
    assert report.run_id == first.run_id
    decoded = await judge.baseline(pair, report, suite)
    assert await judge.baseline(pair, report, suite) is decoded
    reloaded = load_config(daemon.config_file, daemon.environ).suites["core"]
    again = await judge.baseline(pair, report, reloaded)
    assert again is not decoded
    assert again == decoded  # the same cases: decoded alike
    assert await judge.baseline(pair, None, suite) is None


async def test_a_pin_changed_by_another_process_is_the_next_runs_baseline(
    daemon: Daemon, config: Path
) -> None:
    first = await daemon.run_now(VENDOR)
    second = await daemon.run_now(VENDOR)
    assert second.baseline is not None
    assert second.baseline.run_id == first.run_id
    # `ragcanary baseline accept --run` from another process, on its own connection.
    with Store.from_url(daemon.loaded.config.storage) as other:
        other.set_baseline("core", "vendor", second.run_id)
    third = await daemon.run_now(VENDOR)
    assert third.baseline is not None
    assert third.baseline.run_id == second.run_id
    with Store.from_url(daemon.loaded.config.storage) as other:
        other.set_baseline("core", "vendor", first.run_id)
    fourth = await daemon.run_now(VENDOR)
    assert fourth.baseline is not None
    assert fourth.baseline.run_id == first.run_id


# Where the objects of a run's queries come from: the HTTP client and ragcanary itself.
QUERY_MODULES = ("httpx", "httpcore", "aiohttp", "multidict", "yarl", "ragcanary")


async def test_a_run_leaves_nothing_for_the_garbage_collector(daemon: Daemon) -> None:
    """Everything a run makes is freed when its last reference goes, none of it in a cycle.

    A response left in a reference cycle (httpx's response and its body's stream refer to
    each other) takes its request, headers and aiohttp's response with it into the garbage
    the collector must find: about 20 objects a query, whose collection held the event loop
    for tens of milliseconds at 666 queries a second (docs/performance.md).
    """
    await daemon.run_now(VENDOR)  # the first run pins its baseline and opens connections
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage
    try:
        for _ in range(3):
            await daemon.run_now(VENDOR)
        gc.collect()
        found = [type(o) for o in gc.garbage if type(o).__module__.startswith(QUERY_MODULES)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == []


class _HeldJudge:
    """``judge_run`` that waits, in whatever thread runs it, until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.thread: int | None = None
        self.held = False  # whether the test's release, not the safety deadline, ended the wait

    def __call__(
        self,
        loaded: LoadedConfig,
        suite: str,
        target: str,
        run: RunResult,
        baseline: RunResult | None,
        evidence: IndexEvidence | None = None,
        endpoints: Sequence[EndpointRun] = (),
    ) -> Evaluation:
        self.thread = threading.get_ident()
        self.entered.set()
        # On the event loop this wait would stall the test itself: the deadline turns that
        # into a failure instead of a hang.
        self.held = self.released.wait(timeout=30)
        return judge_run(loaded, suite, target, run, baseline, evidence, endpoints)


async def test_metrics_answer_while_a_run_is_being_judged(config: Path) -> None:
    held = _HeldJudge()
    daemon = _daemon(config, Judge(judge=held))
    transport = httpx.ASGITransport(create_app(daemon.service))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
            running = asyncio.ensure_future(daemon.run_now(VENDOR))
            assert await asyncio.to_thread(held.entered.wait, 30)
            scrape = await api.get("/metrics")  # while the judge still holds the run
            assert scrape.status_code == 200
            assert not running.done()
            held.released.set()
            report = await running
    finally:
        held.released.set()
        await daemon.shutdown()
    assert held.held
    assert held.thread != threading.get_ident()
    assert report.outcome == "ok"
    assert report.coverage == 1.0
