"""Labels that left the index: asked of the target now and then, stale at once when gone."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml

from ragcanary.measure.run_report import IndexLookup, StaleLabelEntry
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.stale.index_checks import IndexChecks, IndexView
from ragcanary.suites.loaded import load_config

QUESTION = (("d1", "d2"), "config")
IDS = ["d1", "d2"]
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        """The wall clock, moving with the monotonic one."""
        return T0 + timedelta(seconds=self.now - 1000.0)


def test_a_pair_asks_again_after_its_runs_or_an_hour_whichever_comes_first() -> None:
    clock = Clock()
    checks = IndexChecks(every_s=3600.0, clock=clock)
    pair = ("core", "kb")
    assert checks.due(pair, QUESTION, runs=3)
    assert checks.view(pair, IDS) == IndexView(None, None)
    checks.remember(pair, QUESTION, IDS, {"d2"}, T0)
    assert checks.view(pair, IDS) == IndexView({"d2": T0}, T0)
    assert [checks.due(pair, QUESTION, runs=3) for _ in range(3)] == [False, False, True]
    checks.remember(pair, QUESTION, IDS, None, T0)  # could not tell: asked again in turn
    clock.now += 3599.0
    assert not checks.due(pair, QUESTION, runs=50)
    clock.now += 1.0
    assert checks.due(pair, QUESTION, runs=50)


def test_other_labels_or_another_target_config_are_asked_at_once() -> None:
    checks = IndexChecks(clock=Clock())
    pair = ("core", "kb")
    checks.remember(pair, QUESTION, IDS, set(), T0)
    assert not checks.due(pair, QUESTION, runs=50)
    assert checks.due(pair, (("d1", "d2", "d3"), "config"), runs=50)
    assert checks.due(pair, (("d1", "d2"), "another config"), runs=50)


def test_each_answer_keeps_its_own_time_and_a_failed_one_forgets_nothing() -> None:
    """What the index said of an id stays, with when it said it, until it is asked again."""
    checks = IndexChecks(clock=Clock())
    pair = ("core", "kb")
    later = T0 + timedelta(minutes=5)
    checks.remember(pair, QUESTION, IDS, set(), T0)
    checks.update(pair, ["d2"], {"d2"}, later)  # d2 left its top-k; asked again: gone
    assert checks.view(pair, IDS) == IndexView({"d2": later}, T0)
    checks.update(pair, ["d2"], None, later + timedelta(minutes=1))  # could not tell
    assert checks.view(pair, IDS) == IndexView({"d2": later}, T0)
    checks.remember(pair, QUESTION, IDS, None, later + timedelta(minutes=2))  # nor could this
    assert checks.view(pair, IDS) == IndexView({"d2": later}, T0)
    checks.update(pair, ["d2"], set(), later + timedelta(minutes=3))  # restored
    assert checks.view(pair, IDS) == IndexView({}, T0)
    checks.remember(pair, (("d1",), "config"), ["d1"], None, later)  # another question
    assert checks.view(pair, ["d1"]) == IndexView(None, None)  # nothing known of it


class Pinecone:
    """A Pinecone index that returns ``returned`` for every canary and holds ``held``."""

    def __init__(self) -> None:
        self.held = {"d1", "d2"}
        self.returned = ["d1"]
        self.fetches: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/vectors/fetch":
            asked = request.url.params.get_list("ids")
            self.fetches.append(asked)
            vectors = {i: {"id": i, "values": [0.1]} for i in asked if i in self.held}
            return httpx.Response(200, json={"vectors": vectors, "namespace": ""})
        hits = [{"_id": i, "_score": 0.9, "fields": {}} for i in self.returned]
        return httpx.Response(200, json={"result": {"hits": hits}})


def _daemon(tmp_path: Path, index: Pinecone, clock: Clock) -> Daemon:
    """A daemon (not started) running suite core on the Pinecone index ``index``."""
    cases = [
        {"id": "c1", "query": "first", "relevant": ["d1"]},
        {"id": "c2", "query": "second", "relevant": ["d2"]},
    ]
    (tmp_path / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "targets": {"pc": {"preset": "pinecone", "url": "https://idx.pinecone.test"}},
        "suites": {"core": {"cases": "core.yaml", "targets": ["pc"], "stale_label_runs": 50}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    daemon = Daemon(
        path,
        {},
        load_config(path, {}),
        client_factory=lambda _: httpx.AsyncClient(transport=httpx.MockTransport(index)),
        index_checks=IndexChecks(clock=clock, wall_clock=clock.wall),
    )
    daemon.exporter.load(suite_pairs(daemon.loaded))  # as startup does
    return daemon


KEY = JobKey("core", "pc")
GAUGE = {"suite": "core", "target": "pc"}


@pytest.mark.anyio
async def test_a_document_the_index_lost_is_a_stale_label_at_its_next_lookup(
    tmp_path: Path,
) -> None:
    """An id no canary returned is asked about with every relevant id, now and then."""
    index, clock = Pinecone(), Clock()
    daemon = _daemon(tmp_path, index, clock)
    try:
        # Too few runs to tell what no canary gets back, but the index holds every label.
        first = await daemon.run_now(KEY)
        assert first.stale_labels == ()
        assert first.index_lookup == IndexLookup(at=T0.isoformat(), ids=2, left=(), left_at=None)
        assert index.fetches == [["d1", "d2"]]
        index.held.discard("d2")  # a data migration deleted it
        # Not asked again within the hour: d2 left no canary's top-k. The report says when
        # the index was looked up, so nobody reads this as a fresh "still held".
        again = await daemon.run_now(KEY)
        assert again.stale_labels == ()
        assert again.index_lookup is not None
        assert again.index_lookup.at == T0.isoformat()
        assert len(index.fetches) == 1
        clock.now += 3600.0
        at = clock.wall().isoformat()
        later = await daemon.run_now(KEY)
        assert later.stale_labels == (StaleLabelEntry("c2", "d2", "missing", looked_up_at=at),)
        assert later.index_lookup is not None
        assert later.index_lookup.at == at
        assert len(index.fetches) == 2
        assert daemon.exporter.registry.get_sample_value("ragcanary_stale_labels", GAUGE) == 1.0
    finally:
        await daemon.keeper.close()


@pytest.mark.anyio
async def test_a_relevant_id_that_leaves_its_top_k_is_looked_up_in_that_run(
    tmp_path: Path,
) -> None:
    """Within the hour and the stale_label_runs, an id that left is asked about at once, alone,
    in every run it stays out; the ids that stayed are not asked again."""
    index, clock = Pinecone(), Clock()
    index.returned = ["d1", "d2"]
    daemon = _daemon(tmp_path, index, clock)
    try:
        assert (await daemon.run_now(KEY)).stale_labels == ()  # the baseline
        assert index.fetches == [["d1", "d2"]]
        clock.now += 60.0
        index.held.discard("d2")  # deleted: no canary gets it back from now on
        index.returned = ["d1"]
        at = clock.wall().isoformat()
        report = await daemon.run_now(KEY)
        assert report.stale_labels == (StaleLabelEntry("c2", "d2", "missing", looked_up_at=at),)
        lookup = IndexLookup(at=T0.isoformat(), ids=2, left=("d2",), left_at=at)
        assert report.index_lookup == lookup
        assert index.fetches[1:] == [["d2"]]  # once, for the diagnosis and the stale labels
        assert daemon.exporter.registry.get_sample_value("ragcanary_stale_labels", GAUGE) == 1.0
        # The index said so in this run: the canary and the run fail, and the cause is named.
        assert report.outcome == "regression"
        assert [f.kind for f in report.failures if f.case == "c2"] == ["lost_document"]
        assert report.diagnosis is not None
        assert report.diagnosis.cause == "index_lost"
        assert report.diagnosis.causes[0].evidence == f"looked up at {at}: not found"
        sample = daemon.exporter.registry.get_sample_value
        assert sample("ragcanary_lost_documents", GAUGE) == 1.0
        assert sample("ragcanary_diagnosis", {**GAUGE, "cause": "index_lost"}) == 1.0
        assert sample("ragcanary_diagnosis", {**GAUGE, "cause": "none"}) == 0.0
        clock.now += 60.0
        index.held.add("d2")  # restored, though still outranked: no longer stale
        report = await daemon.run_now(KEY)
        assert report.stale_labels == ()
        assert report.index_lookup is not None
        assert report.index_lookup.left_at == clock.wall().isoformat()
        assert index.fetches[2:] == [["d2"]]
        assert daemon.exporter.registry.get_sample_value("ragcanary_lost_documents", GAUGE) == 0.0
    finally:
        await daemon.keeper.close()
