"""The daemon's process settings: what start-up built is frozen, collections rarer, files more."""

from __future__ import annotations

import gc
import resource
import sys
from collections.abc import Iterator

import pytest

from ragcanary.serve.process_tuning import (
    OLDER_THRESHOLD,
    SWITCH_INTERVAL_S,
    YOUNG_THRESHOLD,
    raise_file_limit,
    tune_collector,
    tune_switching,
)


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


def test_tune_switching_hands_the_interpreter_over_every_millisecond() -> None:
    """Worker threads (judging, storage) give the event loop its turn within 1 ms, not 5."""
    before = sys.getswitchinterval()
    try:
        tune_switching()
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        assert SWITCH_INTERVAL_S < 0.005  # CPython's default, which the intake's p99 waited on
    finally:
        sys.setswitchinterval(before)


def test_raise_file_limit_lifts_the_soft_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = hard // 2
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        raise_file_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
