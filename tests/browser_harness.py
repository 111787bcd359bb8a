"""Driving Debian's chromium headless through Playwright: the browser, watched tabs, screenshots.

Nothing here downloads a browser: Playwright drives the system's /usr/bin/chromium. Without
it (or without Playwright) a test skips, unless RAGCANARY_REQUIRE_CHROMIUM=1 (CI) makes that
a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
REQUIRE_ENV = "RAGCANARY_REQUIRE_CHROMIUM"
SCREENSHOTS_ENV = "RAGCANARY_UI_SCREENSHOTS"
WIDTHS = (1280, 390)  # a laptop and a phone, the widths issue 17 asks for


def chromium_or_skip() -> Path:
    """The system chromium; skips the test without it or Playwright (fails it in CI)."""
    reason = None
    if not CHROMIUM.exists():
        reason = f"no {CHROMIUM}; install Debian's chromium (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed; pip install -e '.[dev]'"
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1 forbids skipping)")
        pytest.skip(reason)
    return CHROMIUM


def screenshots_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder screenshots go to (RAGCANARY_UI_SCREENSHOTS, else a temporary one), printed."""
    chosen = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the UI pages: {folder}")
    return folder


@contextlib.contextmanager
def chromium(profile: Path, **options: Any) -> Iterator[BrowserContext]:
    """A headless Chromium context with a fresh profile in ``profile``, removed on the way out.

    ``options`` go to Playwright's ``launch_persistent_context`` (``http_credentials``, ...);
    the viewport starts at 1,280 by 900.
    """
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(executable),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
            **options,
        )
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def watched_page(context: BrowserContext) -> Iterator[Page]:
    """A fresh tab that fails the test on a script error, a console error or a dialog."""
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))

    def console(message: Any) -> None:
        # A page answered with 401 or 404 on purpose logs its own status: not a problem.
        if message.type == "error" and message.location.get("url") != tab.url:
            problems.append(f"console {message.type}: {message.text}")

    tab.on("console", console)

    def dialog(box: Any) -> None:
        problems.append(f"a dialog opened: {box.message}")
        box.dismiss()

    tab.on("dialog", dialog)
    try:
        yield tab
    finally:
        tab.close()
    assert not problems, problems


def no_horizontal_scroll(page: Page) -> None:
    """Fail when the page is wider than the window: it would scroll sideways."""
    scroll, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner, f"the page scrolls sideways: {scroll} px wide in {inner} px"


def shot(page: Page, folder: Path, name: str, width: int) -> None:
    """A full-page screenshot as ``folder/NAME-WIDTH.png``."""
    page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
