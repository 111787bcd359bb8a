"""The daemon's garbage-collector settings: what start-up built is frozen, collections rarer."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ragcanary.serve.collector import OLDER_THRESHOLD, YOUNG_THRESHOLD, tune_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    """The test process's collector as it was, whatever the test set."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_tune_collector_freezes_start_up_objects_and_collects_less_often() -> None:
    """Objects alive at start are no longer visited; the young generation waits longer."""
    tune_collector()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
    assert YOUNG_THRESHOLD > 700  # CPython's default, which let runs' objects grow old
