"""What the commands share: common options, loading the config, errors mapped to exits."""

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragcanary.errors import ConfigError, RagcanaryError, UsageError
from ragcanary.suites.loaded import LoadedConfig, config_path, load_config

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config file (default: $RAGCANARY_CONFIG, else ./ragcanary.yaml).",
        show_default=False,
    ),
]
SuiteOption = Annotated[str, typer.Option(help="The suite.")]
TargetOption = Annotated[str, typer.Option(help="The target.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Read a running daemon's API (http://HOST:PORT) instead of the database.",
        show_default=False,
    ),
]


def load(option: Path | None, *, query_targets: bool = True, cases: bool = True) -> LoadedConfig:
    return load_config(
        config_path(option, os.environ), os.environ, query_targets=query_targets, cases=cases
    )


def read_only(option: Path | None) -> LoadedConfig:
    """The config for commands that only read stored runs: no retriever secret is needed."""
    return load(option, query_targets=False)


def _fail(exc: RagcanaryError) -> typer.Exit:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    lines = [str(p) for p in exc.problems] if isinstance(exc, ConfigError) else [str(exc)]
    for line in lines:
        err.print(f"ragcanary: {line}", markup=False)
    if isinstance(exc, ConfigError) and len(lines) > 1:
        err.print(f"ragcanary: {len(lines)} problems found", markup=False)
    return typer.Exit(exc.exit_code)


@contextlib.contextmanager
def running() -> Iterator[None]:
    """A command's work, once it imported what it needs: collect garbage again, and
    turn ragcanary's own errors into their message and exit code, never a traceback."""
    if not gc.isenabled():  # ragcanary.__main__ turned it off for start-up
        gc.freeze()
        gc.enable()
    try:
        yield
    except RagcanaryError as exc:
        raise _fail(exc) from None


def pairs(loaded: LoadedConfig, suite: str | None, target: str | None) -> list[tuple[str, str]]:
    """The (suite, target) pairs a command works on, refusing names the config lacks."""
    suites = loaded.config.suites
    if suite is not None and suite not in suites:
        raise UsageError(f"--suite {suite}: no such suite; the config has: {', '.join(suites)}")
    if target is not None and target not in loaded.config.targets:
        known = ", ".join(loaded.config.targets)
        raise UsageError(f"--target {target}: no such target; the config has: {known}")
    pairs = [
        (s, t)
        for s, cfg in suites.items()
        if suite in (None, s)
        for t in cfg.targets
        if target in (None, t)
    ]
    if not pairs:
        raise UsageError("nothing to run: no suite uses that target; check suites.*.targets")
    return pairs


def write_output(path: Path, option: str, render: Callable[[], str]) -> None:
    """Write an output file, creating its directories; a path that cannot be written is exit 2."""
    text = render()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _fail(
            UsageError(
                f"{option} {path}: cannot write it ({exc.strerror}); choose a path in a "
                "writable directory"
            )
        ) from None
