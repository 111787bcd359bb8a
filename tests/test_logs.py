"""Logging setup: JSON lines off a terminal, levels, and secrets redacted wherever they hide."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import structlog
from structlog.testing import capture_logs

from ragcanary.logs import RedactSecrets, configure_logging

SECRET = "sk-log-0c9f1e2d"
TOKEN = "adm-log-77ab31"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    root, scheduler = logging.getLogger(), logging.getLogger("apscheduler")
    saved = (list(root.handlers), root.level, scheduler.level)
    yield
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    scheduler.setLevel(saved[2])


def _logged(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _configured(level: str = "info", fmt: str | None = "json", secrets=()) -> io.StringIO:
    stream = io.StringIO()
    configure_logging(level, fmt, RedactSecrets(secrets), stream)
    return stream


def test_json_format_writes_one_object_per_line_with_level_and_utc_time() -> None:
    stream = _configured()
    log = structlog.get_logger("ragcanary")
    log.info("run", suite="core", coverage=1.0, reasons={"timeout": 2})
    log.warning("queries failed", examples=["a", "b"])
    first, second = _logged(stream)
    assert first["event"] == "run"
    assert (first["level"], second["level"]) == ("info", "warning")
    assert (first["suite"], first["coverage"], first["reasons"]) == ("core", 1.0, {"timeout": 2})
    assert second["examples"] == ["a", "b"]
    assert datetime.fromisoformat(first["timestamp"]).utcoffset().total_seconds() == 0


def test_json_is_the_default_when_the_stream_is_not_a_terminal() -> None:
    stream = _configured(fmt=None)
    structlog.get_logger().info("started", jobs=["core/vendor"])
    (event,) = _logged(stream)
    assert event["jobs"] == ["core/vendor"]


def test_console_format_is_plain_text_without_colours_off_a_terminal() -> None:
    stream = _configured(fmt="console")
    structlog.get_logger().info("started", listen="127.0.0.1:9464")
    text = stream.getvalue()
    assert "started" in text
    assert "listen=127.0.0.1:9464" in text
    assert "\x1b[" not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("info", ["info", "warning", "error"]),
        ("WARNING", ["warning", "error"]),
        ("error", ["error"]),
        ("critical", []),
    ],
)
def test_events_below_the_level_are_dropped(level: str, expected: list[str]) -> None:
    stream = _configured(level)
    log = structlog.get_logger()
    for method in ("debug", "info", "warning", "error"):
        getattr(log, method)(f"at {method}")
    assert [e["level"] for e in _logged(stream)] == expected


def test_secrets_are_redacted_in_nested_values() -> None:
    stream = _configured(secrets=[SECRET, TOKEN])
    structlog.get_logger().warning(
        f"refused {SECRET}",
        headers={"X-Api-Key": SECRET, "nested": [{"token": f"Bearer {TOKEN}"}, ("t", TOKEN)]},
        attempts=3,
        error=None,
    )
    text = stream.getvalue()
    assert SECRET not in text
    assert TOKEN not in text
    (event,) = _logged(stream)
    assert event["event"] == "refused ***"
    assert event["headers"] == {
        "X-Api-Key": "***",
        "nested": [{"token": "Bearer ***"}, ["t", "***"]],
    }
    assert (event["attempts"], event["error"]) == (3, None)


def test_secrets_are_redacted_from_objects_rendered_as_text() -> None:
    stream = _configured(secrets=[SECRET])
    structlog.get_logger().error(
        "failed",
        url=httpx.URL(f"http://127.0.0.1/search?key={SECRET}"),
        error=ValueError(f"bad key {SECRET}"),
        keys={SECRET},
    )
    assert SECRET not in stream.getvalue()
    (event,) = _logged(stream)
    assert event["url"] == "http://127.0.0.1/search?key=***"
    assert event["error"] == "bad key ***"


def test_secrets_are_redacted_from_tracebacks_and_bound_context() -> None:
    stream = _configured(secrets=[SECRET])
    structlog.contextvars.bind_contextvars(target_url=f"http://h/?k={SECRET}")
    try:
        raise RuntimeError(f"connect failed with key {SECRET}")
    except RuntimeError:
        structlog.get_logger().exception("run failed unexpectedly")
    assert SECRET not in stream.getvalue()
    (event,) = _logged(stream)
    assert "RuntimeError: connect failed with key ***" in event["exception"]
    assert event["target_url"] == "http://h/?k=***"


def test_update_replaces_the_secrets_after_a_reload() -> None:
    redactor = RedactSecrets(["old-secret"])
    redactor.update(["new-secret"])
    event = redactor(None, "info", {"event": "old-secret new-secret"})
    assert event == {"event": "old-secret ***"}


def test_redactor_leaves_events_without_secrets_equal() -> None:
    event = {
        "event": "run",
        "metrics": {"mrr": 0.5},
        "ids": ["a", "b"],
        "url": httpx.URL("http://h"),
    }
    assert RedactSecrets([SECRET])(None, "info", dict(event)) == event


def test_redactor_is_a_processor_that_runs_before_the_renderer() -> None:
    redactor = RedactSecrets([SECRET])
    with capture_logs(processors=[redactor]) as captured:
        structlog.get_logger().info("key", value=f"={SECRET}")
    assert captured == [{"event": "key", "value": "=***", "log_level": "info"}]


# --- libraries that log through the standard library ----------------------------------------


def test_stdlib_records_become_json_lines_with_logger_name_and_redaction() -> None:
    stream = _configured(secrets=[SECRET])
    logging.getLogger("apscheduler.executors.default").warning(
        'Execution of job "%s" skipped: maximum number of running instances reached', "core/vendor"
    )
    logging.getLogger("somelib").error("cannot bind with key %s", SECRET)
    skipped, error = _logged(stream)
    assert skipped["level"] == "warning"
    assert skipped["logger"] == "apscheduler.executors.default"
    assert skipped["event"].startswith('Execution of job "core/vendor" skipped')
    assert "timestamp" in skipped
    assert error["event"] == "cannot bind with key ***"
    assert SECRET not in stream.getvalue()


def test_stdlib_exceptions_are_formatted_and_redacted() -> None:
    stream = _configured(secrets=[SECRET])
    try:
        raise OSError(f"disk full at {SECRET}")
    except OSError:
        logging.getLogger("somelib").exception("server crashed")
    (event,) = _logged(stream)
    assert event["event"] == "server crashed"
    assert "OSError: disk full at ***" in event["exception"]


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("info", ["somelib warning", "somelib info", "apscheduler warning"]),
        ("warning", ["somelib warning", "apscheduler warning"]),
        ("debug", ["somelib warning", "somelib info", "apscheduler warning", "apscheduler info"]),
    ],
)
def test_stdlib_records_follow_the_level_and_scheduler_chatter_needs_debug(
    level: str, expected: list[str]
) -> None:
    stream = _configured(level)
    for name in ("somelib", "apscheduler"):
        logging.getLogger(name).warning(f"{name} warning")
        logging.getLogger(name).info(f"{name} info")
    assert [e["event"] for e in _logged(stream)] == expected


def test_configuring_twice_does_not_duplicate_stdlib_lines() -> None:
    _configured()
    stream = _configured()
    logging.getLogger("somelib").warning("once")
    assert [e["event"] for e in _logged(stream)] == ["once"]
