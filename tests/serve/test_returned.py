"""ReturnedIds: what a pair's recent runs returned, kept between runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragcanary.serve.stale.returned import ReturnedIds

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
PAIR = ("core", "search")


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_ids_of_runs_older_than_the_window_no_longer_count() -> None:
    book = ReturnedIds()
    book.add(PAIR, "r0", at(0), ["a", "b"])
    book.add(PAIR, "r1", at(1), ["b"])
    book.add(PAIR, "r2", at(2), ["c"])
    assert book.returned(PAIR, at(1)) == {"b", "c"}
    assert book.returned(PAIR, at(0)) == {"b", "c"}  # "a" was forgotten with r0


def test_an_id_counts_while_its_newest_run_is_in_the_window_whatever_order_runs_arrive() -> None:
    book = ReturnedIds()
    book.add(PAIR, "r2", at(2), ["a"])
    book.add(PAIR, "r0", at(0), ["a"])  # an older run read from storage later
    assert book.returned(PAIR, at(1)) == {"a"}


def test_unseen_lists_only_the_runs_never_added_and_forgets_those_left_behind() -> None:
    book = ReturnedIds()
    book.add(PAIR, "r0", at(0), [])
    book.add(PAIR, "r1", at(1), ["a"])
    window = [("r2", at(2)), ("r1", at(1)), ("r0", at(0))]
    assert book.unseen(PAIR, window) == ["r2"]
    book.returned(PAIR, at(1))
    assert book.unseen(PAIR, window) == ["r2", "r0"]


def test_pairs_are_kept_apart_and_a_forgotten_pair_starts_empty() -> None:
    book = ReturnedIds()
    book.add(PAIR, "r0", at(0), ["a"])
    book.add(("core", "other"), "r9", at(0), ["z"])
    book.forget(PAIR)
    assert book.returned(PAIR, at(0)) == set()
    assert book.unseen(PAIR, [("r0", at(0))]) == ["r0"]
    assert book.returned(("core", "other"), at(0)) == {"z"}
