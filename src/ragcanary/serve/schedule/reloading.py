"""What a config reload changes (jobs and targets), and what `/-/reload` answers about it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragcanary.suites.loaded import LoadedConfig

T = TypeVar("T")


@dataclass(frozen=True)
class Kinds:
    """Names sorted into added, removed, changed and unchanged, each list sorted."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "unchanged": list(self.unchanged),
        }


@dataclass(frozen=True)
class Changes:
    """How a new config differs from the running one.

    ``jobs`` are ``suite/target`` ids; ``rescheduled`` are the jobs in both whose schedule
    (``every`` or ``cron``) differs: only those, and added ones, get a new next run time.
    """

    jobs: Kinds
    targets: Kinds
    rescheduled: frozenset[str]
    restart_needed: tuple[str, ...]  # top-level settings that only a restart applies

    def as_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs.as_dict(), "targets": self.targets.as_dict()}


def job_id(suite: str, target: str) -> str:
    """The scheduler's id of the job that runs ``suite`` against ``target``."""
    return f"{suite}/{target}"


def compare(old: LoadedConfig, new: LoadedConfig) -> Changes:
    """What reloading ``new`` over the running ``old`` would change (pure)."""
    old_jobs, new_jobs = _jobs(old), _jobs(new)
    old_targets, new_targets = old.config.targets, new.config.targets
    rescheduled = frozenset(
        key
        for key in old_jobs.keys() & new_jobs.keys()
        if _schedule(old, old_jobs[key][0]) != _schedule(new, new_jobs[key][0])
    )
    return Changes(
        jobs=_sort(
            old_jobs,
            new_jobs,
            lambda key: _job_settings(old, *old_jobs[key]) == _job_settings(new, *new_jobs[key]),
        ),
        targets=_sort(old_targets, new_targets, lambda n: old_targets[n] == new_targets[n]),
        rescheduled=rescheduled,
        restart_needed=tuple(
            name
            for name in ("storage", "listen")
            if getattr(old.config, name) != getattr(new.config, name)
        ),
    )


def _jobs(loaded: LoadedConfig) -> dict[str, tuple[str, str]]:
    return {
        job_id(suite, target): (suite, target)
        for suite, cfg in loaded.config.suites.items()
        for target in cfg.targets
    }


def _schedule(loaded: LoadedConfig, suite: str) -> tuple[float | None, str | None]:
    cfg = loaded.config.suites[suite]
    return cfg.every, cfg.cron


def _job_settings(loaded: LoadedConfig, suite: str, target: str) -> tuple[Any, ...]:
    """Everything a job's runs depend on: its suite's settings and cases, its target's."""
    return (loaded.config.suites[suite], loaded.suites.get(suite), loaded.config.targets[target])


def _sort(old: Mapping[str, T], new: Mapping[str, T], same: Any) -> Kinds:
    both = sorted(old.keys() & new.keys())
    return Kinds(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(name for name in both if not same(name)),
        unchanged=tuple(name for name in both if same(name)),
    )


@dataclass(frozen=True)
class ReloadResult:
    """What a reload did; ``body`` and ``status`` are what `/-/reload` answers.

    200: applied, with the changes. 400: the new config is invalid, with every located
    problem; nothing changed. 500: applying it failed and was rolled back; nothing changed.
    """

    reloaded: bool
    status: int
    changes: Changes | None = None
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reloaded": self.reloaded}
        if self.changes is not None:
            out["changes"] = self.changes.as_dict()
        if self.problems:
            out["problems"] = list(self.problems)
            out["detail"] = "the new config was not applied; the previous one keeps running"
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out
