"""Debian's Chromium, headless, driven by Playwright: the one way the tests, bench/panel.py and the screenshots
launch a browser (never a browser Playwright downloads)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from playwright.async_api import Browser, async_playwright

CHROMIUM = "/usr/bin/chromium"
# No sandbox (CI runs as root); no GPU, QUIC or background connections (the machine's network is closed).
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium for the duration of the block."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            await browser.close()
