"""The exceptions ragcanary raises, translated at the boundary into messages and exit codes.

    RagcanaryError                 base; the CLI maps it to a message and an exit code
    ├── ConfigError                config or suite file is wrong (exit 2); carries every Problem
    └── UsageError                 a command was asked something impossible (exit 2)

A target that fails is not an exception: every failure of a query becomes an
``Outcome`` on its ``CaseResult`` so one bad answer never stops a run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a config or suite file, located precisely enough to fix it."""

    file: str
    path: str  # dotted field path, e.g. "suites.core.every" or "cases[3].query"
    message: str  # what is wrong, e.g. '"5 minutes" is not a duration'
    fix: str  # what to do, e.g. "write it like 30s, 5m or 1h"
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file} line {self.line}" if self.line is not None else self.file
        path = f"{self.path}: " if self.path else ""
        end = "" if self.fix.endswith((".", "?", "!")) else "."
        return f"{path}{self.message} ({where}); {self.fix}{end}"


class RagcanaryError(Exception):
    """Base of every error ragcanary raises on purpose."""

    exit_code = 2


class ConfigError(RagcanaryError):
    """The config or a suite file is wrong; ``problems`` lists every mistake found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class UsageError(RagcanaryError):
    """A command was given arguments that cannot work (unknown suite, unreadable report...)."""
