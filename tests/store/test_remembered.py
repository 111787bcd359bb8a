"""What a store remembers of the rankings it read: made once, bounded, never stale."""

from __future__ import annotations

from ragcanary.store.remembered import Remembered


def test_only_what_is_not_remembered_is_made() -> None:
    made: list[set[int]] = []

    def make(keys: set[int]) -> dict[int, str]:
        made.append(set(keys))
        return {key: f"v{key}" for key in keys}

    remembered: Remembered[str] = Remembered(10)
    assert remembered.read({1, 2}, make) == {1: "v1", 2: "v2"}
    assert remembered.read({2, 3}, make) == {2: "v2", 3: "v3"}
    assert made == [{1, 2}, {3}]


def test_past_its_limit_it_forgets_and_still_answers() -> None:
    remembered: Remembered[int] = Remembered(3)
    assert remembered.read({1, 2, 3}, lambda keys: {k: k for k in keys}) == {1: 1, 2: 2, 3: 3}
    assert remembered.read({4}, lambda keys: {k: k for k in keys}) == {4: 4}
    made: list[set[int]] = []
    remembered.read({1, 4}, lambda keys: made.append(keys) or {k: k for k in keys})
    assert made == [{1}]  # 1 was forgotten when 4 came, 4 is remembered


def test_more_at_once_than_its_limit_is_answered_and_not_kept() -> None:
    remembered: Remembered[int] = Remembered(2)
    assert remembered.read({1, 2, 3}, lambda keys: {k: -k for k in keys}) == {1: -1, 2: -2, 3: -3}
    made: list[set[int]] = []
    remembered.read({1}, lambda keys: made.append(keys) or {k: -k for k in keys})
    assert made == [{1}]
