"""Headless Chromium from Debian's ``chromium`` package, driven by Playwright (FIELD-NOTES:
Playwright's own browser download does not work offline; the system package does).

``DRYDOCK_TEST_CHROMIUM`` names another executable; without one the browser tests skip, saying
how to install it (``pdm run integration`` installs it when it runs as root). Screenshots go to
``DRYDOCK_TEST_ARTIFACTS`` (the integration runner sets and prints it), else a temporary
directory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Error, Page, async_playwright

CHROMIUM = Path(os.environ.get("DRYDOCK_TEST_CHROMIUM", "/usr/bin/chromium"))
INSTALLED = CHROMIUM.exists()
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts() -> Path:
    """Where screenshots are saved."""
    root = Path(os.environ.get("DRYDOCK_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "drydock-artifacts")
    folder = root / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def chromium() -> AsyncIterator[Browser]:
    """The browser, or a skip with the reason."""
    if not INSTALLED:
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's chromium package (`apt-get install -y chromium`; "
            "`pdm run integration` does it when run as root) or set DRYDOCK_TEST_CHROMIUM"
        )
    async with async_playwright() as playwright:
        try:
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        except Error as error:
            pytest.skip(f"Chromium at {CHROMIUM} does not start: {error.message.splitlines()[0]}")
        try:
            yield browser
        finally:
            await browser.close()


async def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact; returns its path."""
    path = artifacts() / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path
