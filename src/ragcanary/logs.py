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
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    if redactor is not None:
        processors.append(redactor)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
