"""Naming a stored run by its whole id or a unique prefix of 8+ characters, on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_storage import NOW, make_report

from ragcanary.errors import UsageError
from ragcanary.store.errors import AmbiguousRun, UnknownRun
from ragcanary.store.run_ids import resolve_run_id
from ragcanary.store.storage import Store

FIRST = "c4fcf40e97184b1f9a0e6d2c1b7a5f30"
TWIN = "c4fcf40e1111222233334444555566aa"  # the same first 8 characters as FIRST
OTHER = "9d0a7e5b3c2f41d8b6a4e1f0c9d8b7a6"


@pytest.fixture
def filled(store: Store) -> Store:
    for i, run_id in enumerate((FIRST, TWIN, OTHER, "aged-10d", "run", "run-two")):
        store.save_run(make_report(run_id, NOW + timedelta(minutes=i)))
    return store


@pytest.mark.parametrize(
    ("given", "found"),
    [
        (FIRST, FIRST),
        (FIRST[:12], FIRST),  # what `run --baseline` prints
        (FIRST[:9], FIRST),
        (OTHER[:8], OTHER),
        ("aged-10d", "aged-10d"),  # a whole id needs no 8 characters
        ("run", "run"),  # a whole id wins over the ids it begins
    ],
)
def test_a_whole_id_or_a_unique_prefix_names_its_run(filled: Store, given: str, found: str) -> None:
    assert resolve_run_id(filled, given) == found


def test_an_ambiguous_prefix_is_an_error_listing_every_candidate(filled: Store) -> None:
    with pytest.raises(AmbiguousRun) as raised:
        resolve_run_id(filled, FIRST[:8])
    message = str(raised.value)
    assert message.startswith(f"run {FIRST[:8]}: ambiguous, 2 stored runs start with it: ")
    assert FIRST in message
    assert TWIN in message
    assert "suite core on target search" in message
    assert "give more of the id" in message
    assert raised.value.candidates == [TWIN, FIRST]  # in id order
    assert isinstance(raised.value, UsageError)  # exit 2 on the command line


def test_a_list_of_many_candidates_is_cut_and_says_so(store: Store) -> None:
    for i in range(14):
        store.save_run(make_report(f"feedbeef{i:02d}"))
    with pytest.raises(AmbiguousRun) as raised:
        resolve_run_id(store, "feedbeef")
    assert len(raised.value.candidates) == 10
    assert "and more" in str(raised.value)


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        (FIRST[:7], "a shortened run id needs at least 8 characters"),
        ("0123456789", "pick one from `ragcanary runs`"),
        (FIRST.upper()[:12], "pick one from `ragcanary runs`"),  # ids are case-sensitive
        ("c4fcf40_%", "pick one from `ragcanary runs`"),  # LIKE's wildcards are plain text
        ("c4fcf40e\udcff", "pick one from `ragcanary runs`"),  # undecodable bytes from argv
        ("c4fcf40e\x00", "pick one from `ragcanary runs`"),
        ("", "pick one from `ragcanary runs`"),
    ],
)
def test_an_id_no_run_has_is_an_error_saying_what_to_pass(
    filled: Store, given: str, hint: str
) -> None:
    with pytest.raises(UnknownRun) as raised:
        resolve_run_id(filled, given)
    assert f"run {given}: no such run in storage" in str(raised.value)
    assert hint in str(raised.value)


def test_an_underscore_in_a_prefix_matches_only_itself(store: Store) -> None:
    store.save_run(make_report("abcdefgh_1"))
    store.save_run(make_report("abcdefghX1"))
    assert resolve_run_id(store, "abcdefgh_") == "abcdefgh_1"
    assert resolve_run_id(store, "abcdefghX") == "abcdefghX1"


def test_every_prefix_names_the_runs_it_begins_and_no_other(store: Store) -> None:
    """Exhaustively, on ids that differ in case, wildcards, and characters around the
    surrogates and beyond ASCII: each prefix finds exactly the ids that begin with it."""
    ids = [
        "abcdefgh",
        "abcdefghi",
        "ABCDEFGHI",
        "abcdefgH1",
        "abcdefg%1",
        "abcdefg_1",
        "abcdefg\ud7ff1",
        "abcdefg\ue0001",
        "abcdefgé1",
        "abcdefgf1",
        "abcdefgi",
        "abcdefg\U0010ffff",
    ]
    for run_id in ids:
        store.save_run(make_report(run_id))
    prefixes = {run_id[:n] for run_id in ids for n in range(8, len(run_id) + 1)}
    prefixes |= {p[:-1] + chr(ord(p[-1]) + 1) for p in prefixes if ord(p[-1]) < 0x10FFFF}
    for prefix in sorted(prefixes):
        if not 0xD800 <= ord(prefix[-1]) < 0xE000:
            expected = {i for i in ids if i == prefix} or {i for i in ids if i.startswith(prefix)}
            try:
                found = {resolve_run_id(store, prefix)}
            except AmbiguousRun as ambiguous:
                found = set(ambiguous.candidates)
                assert len(found) > 1
            except UnknownRun:
                found = set()
            assert found == expected, prefix
