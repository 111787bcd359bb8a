"""Detection quality on a small scale: no false alarms from noise, incidents caught in 3 runs.

The same simulation as ``bench/detection.py`` (which runs 8,640 runs of the whole demo suite),
on every third demo canary and a hundred runs, so that it takes seconds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ragcanary.config.model import Thresholds

BENCH = Path(__file__).resolve().parents[2] / "bench" / "detection.py"
HARSH = 0.01  # the largest score jitter the goal names (sd of one score in one run)
# score_drift this benchmark recommends as the default: at 0.05 a 0.05 shift moves only about
# half of the pairs past the threshold, so the ScoreDrift alert (ratio > 0.5) fires by chance.
SCORE_DRIFT = 0.03


@pytest.fixture(scope="module")
def detection() -> Iterator[ModuleType]:
    """bench/detection.py, imported the way bench/run.py does (bench/ on the path)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH.parent))
        spec = importlib.util.spec_from_file_location("detection", BENCH)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # dataclasses look their module up in sys.modules while they are built.
        patch.setitem(sys.modules, "detection", module)
        spec.loader.exec_module(module)
        yield module


@pytest.fixture(scope="module")
def world(detection: ModuleType) -> object:
    """Every third canary of the demo suite (35), with its true rankings."""
    return detection.World(Thresholds(score_drift=SCORE_DRIFT), stride=3)


def test_alert_rules_are_read_from_alerts_yml(detection) -> None:
    rules = detection.alert_rules()
    assert rules["RagCanaryScoreDrift"].threshold == 0.5
    assert rules["RagCanaryHitRateDrop"].threshold == 0.02
    assert all(rule.runs >= 2 for rule in rules.values())


@pytest.mark.parametrize("seed", [1, 2])
def test_noisy_unchanged_retriever_gives_no_false_verdict_or_alert(detection, world, seed) -> None:
    observed, _ = detection.watch_unchanged(world, HARSH, seed, 0, 50)
    assert len(observed) == 50
    assert [r["kinds"] for r in observed if r["regression"]] == []
    assert [r["conditions"] for r in observed if r["conditions"]] == []
    # The noise is there: rankings do churn against the baseline.
    assert min(r["rank_overlap"] for r in observed) < 0.95


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_hit_rate_drop_is_a_regression_within_three_runs(detection, world, seed) -> None:
    # Five canaries: the fewest a paired sign-flip test can call significant at 0.05 (1/2**5).
    trial = detection.watch_incident(world, "drop", HARSH, seed, dropped=5, horizon=3)
    assert trial["verdict"] is not None
    assert trial["verdict"] <= 3
    assert "drop" in trial["kinds"]


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_score_shift_meets_the_score_drift_alert_condition_within_three_runs(
    detection, world, seed
) -> None:
    trial = detection.watch_incident(world, "shift", HARSH, seed, horizon=3)
    assert trial["conditions"]["RagCanaryScoreDrift"] is not None
    assert trial["conditions"]["RagCanaryScoreDrift"] <= 3
    assert trial["verdict"] is None  # a score shift is drift, not a quality regression


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_index_side_noise_is_a_regression_within_three_runs(detection, world, seed) -> None:
    """Scores moved once by sd 0.05 and re-sorted: the MRR loss fails the run."""
    trial = detection.watch_incident(world, "index", HARSH, seed, horizon=3)
    baseline_mrr, current_mrr = trial["mrr"]
    assert baseline_mrr - current_mrr > 0.02
    assert trial["verdict"] is not None
    assert trial["verdict"] <= 3
    assert "drop" in trial["kinds"]


@pytest.mark.parametrize(
    ("kind", "seed", "cause"),
    [
        ("drop", 41, "index_lost"),
        ("rename", 42, "ids_changed"),
        ("ann", 43, "ann_miss"),
        ("index", 44, "index_changed"),
        ("model", 45, "query_embedding"),
    ],
)
def test_an_incidents_first_failing_run_names_the_layer_that_broke(
    detection, world, kind, seed, cause
) -> None:
    """The diagnosis reads only the simulated index's answers and the query vectors."""
    assert detection.EXPECTED[kind] == cause
    trial = detection.watch_incident(world, kind, HARSH, seed, horizon=2)
    assert trial["verdict"] == 1
    assert trial["causes"][0] == cause


def test_the_simulated_index_answers_look_ups_from_its_state(detection, world) -> None:
    """Deleted and re-ingested ids are missing under their old id; an unreachable one is
    held, and its exact score is its true one, with no jitter."""
    case = world.droppable()[0]
    ids, true = world.truth[case]
    deleted, moved, unreachable = ids[0], ids[1], ids[2]
    incident = detection.Incident(
        deleted=frozenset({deleted}),
        renamed=frozenset({moved}),
        unreachable=frozenset({unreachable}),
    )
    index = world.index(incident)
    assert asyncio.run(index.missing([deleted, moved, unreachable])) == {deleted, moved}
    vector = world.vectors[case, "model-a"]
    exact = asyncio.run(index.scores([deleted, moved, unreachable], vector))
    assert exact == {unreachable: pytest.approx(true[2])}
    answer, sent = index.search(case, np.random.default_rng(0), HARSH, 5)
    assert sent == vector
    assert deleted not in answer.ids
    assert unreachable not in answer.ids
    assert moved.upper() in answer.ids


def test_unchanged_runs_have_cause_none(detection, world) -> None:
    observed, _ = detection.watch_unchanged(world, HARSH, 3, 0, 20)
    assert [r["cause"] for r in observed] == ["none"] * 20
