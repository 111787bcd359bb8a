"""The "Pinned run" notice: shown for the redirect the pin form answers, for nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from ragcanary.serve.http.ui.pinned import SHOWN_S, notice, redirect_query

TOKEN = "adm-pinned-5b1e"
NOW = 1_800_000_000.0
SAID = "Pinned run r-2 as the baseline of core on vendor."


def _redirect(**changes: Any) -> dict[str, str]:
    return {**redirect_query(TOKEN, "core", "vendor", "r-2", NOW), **changes}


def test_the_redirect_of_a_pin_shows_its_notice() -> None:
    assert notice(TOKEN, _redirect(), NOW + 1) == SAID


@pytest.mark.parametrize(
    ("query", "token", "now"),
    [
        ({"suite": "core", "target": "vendor", "pinned": "r-2"}, TOKEN, NOW),  # a crafted link
        (_redirect(pinned="r-1"), TOKEN, NOW),  # another run
        (_redirect(suite="other"), TOKEN, NOW),  # another pair
        (_redirect(target="mirror"), TOKEN, NOW),
        (_redirect(proof="0" * 64), TOKEN, NOW),
        (_redirect(proof=""), TOKEN, NOW),
        (_redirect(at=str(int(NOW) + 1)), TOKEN, NOW),  # the time is signed too
        (_redirect(at="¹⁸⁰⁰⁰⁰⁰⁰⁰⁰"), TOKEN, NOW),  # digits int() refuses
        (_redirect(at="9" * 5000), TOKEN, NOW),  # more digits than int() converts
        (_redirect(), "adm-another-token", NOW),  # signed by a daemon with another token
        (_redirect(), None, NOW),  # no admin token: nothing can have been pinned
        (_redirect(), TOKEN, NOW + SHOWN_S + 1),  # an old link from the history
        (_redirect(), TOKEN, NOW - 60),  # from the future
    ],
)
def test_anything_else_shows_no_notice(
    query: dict[str, str], token: str | None, now: float
) -> None:
    assert notice(token, query, now) == ""
