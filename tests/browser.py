"""Headless Chromium for the `acp-relay view` tests: the system's browser driven by Playwright for Python.

Only the Debian `chromium` package is used (never `playwright install`, which downloads a browser build).
Outside CI a missing browser or Playwright skips the tests that need them; under CI (CI=true) it fails them,
because .ci/run installs both.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> str | None:
    for path in (os.environ.get("ACP_RELAY_CHROMIUM"), *CANDIDATES, shutil.which("chromium")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why} (.ci/run should have installed it)")
    pytest.skip(why)


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless browser, closed afterwards."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        _missing("no system Chromium (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


class Page:
    """One opened view page, with every request it made and every error it raised recorded."""

    def __init__(self, browser: Any, html: Path, scheme: str = "light") -> None:
        self.page = browser.new_page(viewport={"width": 1440, "height": 860}, color_scheme=scheme)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.goto(html.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=15_000)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.page, name)

    def texts(self, selector: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")

    def wait_text(self, selector: str, text: str) -> None:
        """Wait until `selector` holds exactly `text` (polled by Playwright: the page's CSP forbids eval)."""
        from playwright.sync_api import expect

        expect(self.page.locator(selector)).to_have_text(text, timeout=5_000)

    def close(self) -> None:
        self.page.close()


def screenshot_dir() -> Path:
    """Where this run's screenshots go: $ACP_RELAY_SCREENSHOTS, else a new temporary directory."""
    given = os.environ.get("ACP_RELAY_SCREENSHOTS")
    path = Path(given) if given else Path(tempfile.mkdtemp(prefix="acp-relay-view-shots-"))
    path.mkdir(parents=True, exist_ok=True)
    return path
