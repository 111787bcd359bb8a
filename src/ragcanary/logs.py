"""Logging setup: structlog, JSON when not on a terminal, secrets redacted from every event."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

from ragcanary.redact import Redactor


class RedactSecrets:
    """A structlog processor that replaces every known secret value in an event with ``***``.

    The secrets are replaceable (``update``) because a config reload may bring new ones.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.update(secrets)

    def update(self, secrets: Iterable[str]) -> None:
        self._redact = Redactor(secrets)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redact(value)
        if isinstance(value, dict):
            return {k: self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        # Any other object (an exception, a URL, a set) is rendered through its str or repr,
        # which may quote a secret: give back the redacted text instead of the object.
        for text in (str(value), repr(value)):
            if (cleaned := self._redact(text)) != text:
                return cleaned
        return value

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        return {key: self._clean(value) for key, value in event.items()}


def configure_logging(
    level: str = "info",
    fmt: str | None = None,
    redactor: RedactSecrets | None = None,
    stream: TextIO | None = None,
) -> None:
    """Configure structlog once for the process.

    ``fmt`` is ``json`` or ``console``; by default JSON unless ``stream`` is a terminal.
    """
    out = stream or sys.stderr
    if fmt is None:
        fmt = "console" if out.isatty() else "json"
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    tail: list[Any] = [structlog.processors.format_exc_info]
    if redactor is not None:
        tail.append(redactor)
    tail.append(renderer)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            *tail,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _route_stdlib_logging(out, numeric, [stamp, *tail])


class _StdlibHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler configure_logging installs (and replaces when called again)."""


def _route_stdlib_logging(out: TextIO, level: int, processors: list[Any]) -> None:
    """Send records of libraries that use ``logging`` (APScheduler, uvicorn) the same way.

    Without this they reach stderr as plain text through logging's last-resort handler:
    not JSON, and not redacted.
    """
    handler = _StdlibHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.stdlib.add_logger_name,
            ],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *processors],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StdlibHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # APScheduler's "Running job ..." repeats the daemon's own run line, and httpx logs every
    # canary query; only debug shows them. Their warnings always come through.
    chatter = level if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in ("apscheduler", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(chatter)
