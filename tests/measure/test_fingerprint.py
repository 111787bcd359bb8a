"""Fingerprints: what differs between two runs' is said in one line each, what matters most
first; what either run could not tell is never compared; the report's JSON keeps it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from factories import report_data

from ragcanary.measure.fingerprint import Fingerprint, config_changes, fingerprint_changes
from ragcanary.measure.report_json import marshal, marshal_fingerprint, unmarshal

BEFORE = Fingerprint(
    config_hash="c" * 12,
    suite_hash="s" * 12,
    target_hash="t" * 12,
    embedding_model="all-MiniLM-L6-v2",
    embedding_dimensions=384,
    documents=3086,
    index_settings={"hnsw.ef_search": 100, "hnsw.space": "cosine"},
)


@pytest.mark.parametrize(
    ("changed", "lines"),
    [
        ({}, []),
        (
            {"embedding_model": "bge-small", "embedding_dimensions": 768},
            ["embedding model all-MiniLM-L6-v2 → bge-small", "embedding dimensions 384 → 768"],
        ),
        ({"documents": 2970}, ["documents 3,086 → 2,970 (-116)"]),
        ({"documents": 3100}, ["documents 3,086 → 3,100 (+14)"]),
        ({"embedding_model": None}, ["embedding model all-MiniLM-L6-v2 → none"]),
        (
            {"index_settings": {"hnsw.ef_search": 40, "hnsw.m": 16, "hnsw.space": "cosine"}},
            ["index setting hnsw.ef_search 100 → 40", "index setting hnsw.m unset → 16"],
        ),
        ({"target_hash": "u" * 12}, [f"target settings {'t' * 12} → {'u' * 12}"]),
        ({"suite_hash": "x" * 12}, [f"suite (cases or settings) {'s' * 12} → {'x' * 12}"]),
        ({"config_hash": "d" * 12}, [f"config {'c' * 12} → {'d' * 12}"]),
    ],
)
def test_each_difference_is_one_line(changed: dict[str, Any], lines: list[str]) -> None:
    after = replace(BEFORE, **changed)
    assert [c.text for c in fingerprint_changes(BEFORE, after)] == lines


def test_the_embedding_model_and_the_index_come_before_the_hashes() -> None:
    after = replace(
        BEFORE, config_hash="d" * 12, target_hash="u" * 12, documents=10, embedding_model="bge"
    )
    fields = [c.field for c in fingerprint_changes(BEFORE, after)]
    assert fields == ["embedding_model", "documents", "target_hash", "config_hash"]


@pytest.mark.parametrize(
    "untold",
    [
        {"documents": None},
        {"embedding_dimensions": None},
        {"index_settings": None},
    ],
)
def test_a_value_either_run_could_not_tell_is_never_compared(untold: dict[str, Any]) -> None:
    after = replace(BEFORE, **untold)
    assert fingerprint_changes(BEFORE, after) == ()
    assert fingerprint_changes(after, BEFORE) == ()


def test_a_run_without_a_fingerprint_says_nothing_changed_or_not() -> None:
    assert fingerprint_changes(None, BEFORE) == ()
    assert fingerprint_changes(BEFORE, None) == ()
    assert config_changes(None, BEFORE) == ()


def test_a_baseline_is_checked_only_on_what_the_config_decides() -> None:
    """The config alone gives no count or vector length: those never flag a baseline."""
    now = Fingerprint("c" * 12, "s" * 12, "t" * 12, "all-MiniLM-L6-v2")
    assert config_changes(BEFORE, now) == ()
    changed = replace(now, embedding_model="bge-small", target_hash="u" * 12)
    assert [c.field for c in config_changes(BEFORE, changed)] == ["embedding_model", "target_hash"]
    # The whole config's hash moves with what changes nothing a pair measures (listen, an
    # admin token only the daemon's environment sets): it never flags a baseline alone.
    assert config_changes(BEFORE, replace(now, config_hash="d" * 12)) == ()


def test_the_fingerprint_reads_back_as_it_was_written() -> None:
    data = report_data("r1", fingerprint=marshal_fingerprint(BEFORE))
    report = unmarshal(data)
    assert report.fingerprint == BEFORE
    assert marshal(report)["fingerprint"] == data["fingerprint"]


def test_untold_values_are_left_out_of_the_json() -> None:
    told = replace(BEFORE, documents=None, index_settings=None, embedding_dimensions=None)
    written = marshal(unmarshal(report_data("r1", fingerprint=marshal_fingerprint(told))))[
        "fingerprint"
    ]
    assert written == {
        "config_hash": "c" * 12,
        "suite_hash": "s" * 12,
        "target_hash": "t" * 12,
        "embedding_model": "all-MiniLM-L6-v2",
        "embedding_dimensions": None,
    }


def test_a_report_older_than_fingerprints_has_none_and_writes_none() -> None:
    report = unmarshal(report_data("r1"))
    assert report.fingerprint is None
    assert "fingerprint" not in marshal(report)


def test_values_of_the_wrong_type_read_as_untold() -> None:
    data = report_data(
        "r1",
        fingerprint={
            "config_hash": "c" * 12,
            "suite_hash": "s" * 12,
            "target_hash": "t" * 12,
            "embedding_model": None,
            "embedding_dimensions": "384",
            "documents": 12.5,
            "index_settings": {"ok": 1, "nested": {"no": 1}, "list": [1]},
        },
    )
    found = unmarshal(data).fingerprint
    assert found is not None
    assert (found.embedding_dimensions, found.documents) == (None, None)
    assert found.index_settings == {"ok": 1}
