"""Declared changes (a re-index, a model swap, a deploy) and their maintenance windows.

A change names the targets it touches and a window: from its start until ``finish`` or until
its duration runs out, whichever comes first. No window is open-ended: one over 24 h needs
``max`` (``--max``), and even then it ends within 30 days. While a window is open, the runs of
every suite on its targets go on and are stored with the change's id, and
``ragcanary_maintenance`` is 1 for those pairs, which holds their alerts. Plain records and the
validation of a request; the table is ``store.changes``'s (docs/api.md, "Changes").
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ragcanary.config.units import parse_duration
from ragcanary.measure.report_json import marshal_change
from ragcanary.measure.run_report import ChangeVerdict

KINDS = ("reindex", "embedding_model", "config", "deploy", "other")
DEFAULT_WINDOW = "1h"
MAX_WINDOW_S = 24 * 3600.0  # longer only with max: true
MAX_LONG_WINDOW_S = 30 * 86400.0  # the longest any window may be, max or not
MIN_WINDOW_S = 1.0  # like schedule intervals
MAX_DESCRIPTION = 2000
MAX_TARGETS = 100

State = Literal["open", "finished"]

# What the API's schema admits (the checks below take more forms, like 1h30m): a window of
# 1s to 30d in one unit, and a description with something besides spaces and no NUL, which
# PostgreSQL's text refuses.
WINDOW_PATTERN = r"^([1-9][0-9]{0,3}[sm]|[1-9][0-9]?h|[1-9]d|[12][0-9]d|30d)$"
DESCRIPTION_PATTERN = r"^[^\x00]*[^\s\x00][^\x00]*$"


class ChangeProblem(ValueError):
    """A change request that cannot be recorded: the field it is about, why, and the HTTP
    status that says so (422 a malformed field, 404 a target the config lacks, 409 a window
    over 24 h without ``max``)."""

    def __init__(self, field: str, message: str, status: int = 422) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


@dataclass(frozen=True)
class ChangeRequest:
    """A change to record, checked: its kind, description, targets and window in seconds."""

    kind: str
    description: str
    targets: tuple[str, ...]
    window_s: float


@dataclass(frozen=True)
class Change:
    """One recorded change and its window (aware UTC times)."""

    change_id: str
    kind: str
    description: str
    targets: tuple[str, ...]
    started_at: datetime
    ends_at: datetime  # when the window runs out unless finished before
    finished_at: datetime | None  # when `finish` ended it; None if it was not finished

    @property
    def ended_at(self) -> datetime:
        """When the window closes (or closed): the finish, else the end of its duration."""
        if self.finished_at is not None and self.finished_at < self.ends_at:
            return self.finished_at
        return self.ends_at

    def state(self, now: datetime) -> State:
        return "open" if self.started_at <= now < self.ended_at else "finished"

    def open_at(self, at: datetime) -> bool:
        """Whether ``at`` falls inside the window."""
        return self.started_at <= at < self.ended_at

    def as_dict(self, now: datetime) -> dict[str, Any]:
        """What the API answers and ``change list --json`` prints."""
        finished = self.state(now) == "finished"
        return {
            "id": self.change_id,
            "kind": self.kind,
            "description": self.description,
            "targets": list(self.targets),
            "state": self.state(now),
            "started_at": self.started_at.isoformat(),
            "ends_at": self.ends_at.isoformat(),
            "finished_at": self.ended_at.isoformat() if finished else None,
            "ended_by": ("finish" if self.ended_at != self.ends_at else "window")
            if finished
            else None,
        }


@dataclass(frozen=True)
class PairVerdict:
    """A change's verdict on one (suite, target) pair: the first run after its window and
    the verdict it carries (None: no run yet, or that run carries none)."""

    suite: str
    target: str
    run_id: str | None
    verdict: ChangeVerdict | None

    def as_dict(self) -> dict[str, Any]:
        """What ``GET /api/v1/changes/{id}`` answers of it: the pair, the run, and the run's
        ``change`` object without the change's own id and kind (``null`` while pending)."""
        shown: dict[str, Any] = {"suite": self.suite, "target": self.target, "run_id": self.run_id}
        if self.verdict is None:
            return shown | {
                "verdict": None,
                "before_run_id": None,
                "diagnosis": None,
                "reasons": [],
            }
        carried = marshal_change(self.verdict)
        return shown | {k: v for k, v in carried.items() if k not in ("id", "kind")}


def new_change_id(now: datetime) -> str:
    """A change's id: when it started, readable, and six random hex digits."""
    return f"chg-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def open_windows(changes: Collection[Change], at: datetime) -> list[Change]:
    """The changes whose window holds ``at``, the latest started first."""
    found = [c for c in changes if c.open_at(at)]
    return sorted(found, key=lambda c: (c.started_at, c.change_id), reverse=True)


def change_request(body: Any, known_targets: Collection[str]) -> ChangeRequest:
    """Check a change request (the JSON of ``POST /api/v1/changes``, or the CLI's options).

    ``{"kind", "description", "targets": [...], "window": "30m", "max": false}``; raises
    ``ChangeProblem`` naming the first field that is wrong and what to write instead.
    """
    if not isinstance(body, Mapping):
        raise ChangeProblem("body", "must be a JSON object with kind, description and targets")
    unknown = sorted(set(body) - {"kind", "description", "targets", "window", "max"})
    if unknown:
        raise ChangeProblem(
            unknown[0], "is not a field of a change; give kind, description, targets, window, max"
        )
    kind = body.get("kind")
    if kind not in KINDS:
        raise ChangeProblem("kind", f"{kind!r} is not a kind of change; one of {', '.join(KINDS)}")
    description = body.get("description")
    if not isinstance(description, str) or not re.fullmatch(DESCRIPTION_PATTERN, description):
        raise ChangeProblem("description", "say what changes, in a non-empty string without NUL")
    if len(description) > MAX_DESCRIPTION:
        raise ChangeProblem("description", f"longer than {MAX_DESCRIPTION} characters")
    targets = _targets(body.get("targets"), known_targets)
    allow_long = body.get("max", False)
    if not isinstance(allow_long, bool):
        raise ChangeProblem("max", "must be true or false")
    window = body.get("window", DEFAULT_WINDOW)
    return ChangeRequest(kind, description.strip(), targets, window_seconds(window, allow_long))


def _targets(given: Any, known: Collection[str]) -> tuple[str, ...]:
    if not isinstance(given, list) or not given:
        raise ChangeProblem("targets", "list the names of the targets the change touches")
    if len(given) > MAX_TARGETS:
        raise ChangeProblem("targets", f"more than {MAX_TARGETS} targets")
    for i, name in enumerate(given):
        if not isinstance(name, str):
            raise ChangeProblem(f"targets[{i}]", "a target's name is a string")
        if name not in known:
            configured = ", ".join(sorted(known)) or "none"
            raise ChangeProblem(
                f"targets[{i}]",
                f"{name!r} is no target of the config; configured: {configured}",
                status=404,
            )
    return tuple(dict.fromkeys(given))


def window_seconds(window: Any, allow_long: bool) -> float:
    """The seconds of a window like 30m, 2h or 1d; over 24 h only when ``allow_long``."""
    if not isinstance(window, str | int | float) or isinstance(window, bool):
        raise ChangeProblem("window", "write a duration like 30m, 2h or 1d")
    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        raise ChangeProblem("window", f"{exc}; write it like 30m, 2h or 1d") from None
    if seconds < MIN_WINDOW_S:
        raise ChangeProblem("window", f"{window!r} is shorter than a second")
    if seconds > MAX_WINDOW_S and not allow_long:
        raise ChangeProblem(
            "window",
            f"{window!r} is longer than 24h: finish the change sooner, or allow a longer "
            'window with --max (API: "max": true)',
            status=409,
        )
    if seconds > MAX_LONG_WINDOW_S:
        raise ChangeProblem("window", f"{window!r} is longer than 30d, the longest window there is")
    return seconds


def window_end(started_at: datetime, window_s: float) -> datetime:
    return started_at + timedelta(seconds=window_s)
