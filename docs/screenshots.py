"""Screenshots of the panel for the docs: `vigil demo` on a free port, Debian's Chromium driven by Playwright.

Run: ``make screenshots`` (or ``PYTHONPATH=. python docs/screenshots.py``); writes docs/panel-*.png. Takes about a
minute and a half: the demo imports the bundled knowledge, then plays its conversations for a while.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.async_api import Page

from tests.browser import chromium
from vigil.dev.broker import free_port

DOCS = Path(__file__).resolve().parent
VIGIL = Path(sys.executable).parent / "vigil"


def wait_ready(url: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise TimeoutError("vigil demo did not become ready")


def busiest(url: str) -> tuple[str, str]:
    """A conversation with a suggestion that cites knowledge (a follow-up or a next step cites none), and the entry
    it cites."""
    for item in httpx.get(url + "/api/queue", timeout=5).json():
        if item["unread_suggestions"]:
            view = httpx.get(f"{url}/api/conversations/{item['conversation_id']}", timeout=5).json()
            cited = [s["sources"][0]["id"] for s in view["suggestions"] if s["sources"]]
            if cited:
                return item["conversation_id"], cited[0]
    raise LookupError("no conversation has a suggestion that cites knowledge yet")


async def judge(page: Page, url: str, conversations: int = 8) -> None:
    """Work a few conversations as an analyst would, so the overview has verdicts to show."""
    async with httpx.AsyncClient(timeout=5) as client:
        queue = (await client.get(url + "/api/queue")).json()
    waiting = [c["conversation_id"] for c in queue if c["unread_suggestions"]]
    for n, conversation in enumerate(waiting[:conversations]):
        await page.goto(f"{url}/panel/conversations/{conversation}")
        card = page.locator(".card[data-state='new']").first
        if n % 3 == 2:
            await card.get_by_role("button", name="Dismiss").click()
            await card.get_by_role("button", name="Confirm dismiss").click()
        else:
            await card.get_by_role("button", name="Accept").click()
        await page.wait_for_selector(".card[data-state='accepted'], .card[data-state='dismissed']")
    await asyncio.sleep(2)  # the verdicts travel through the input topic before they are stored


async def shoot(url: str) -> None:
    async with chromium() as browser:
        page: Page = await browser.new_page(viewport={"width": 1366, "height": 820})
        await page.goto(url + "/panel")
        await page.wait_for_selector("body[data-live='on']")
        await asyncio.sleep(1.5)  # the rows a live update changed are read again for their state and order
        await page.screenshot(path=DOCS / "panel-queue.png")
        conversation, source = await asyncio.to_thread(busiest, url)
        await page.goto(f"{url}/panel/conversations/{conversation}")
        await page.wait_for_selector(".card")
        await asyncio.sleep(1.5)  # and the Progress section is drawn again after a live update
        await page.screenshot(path=DOCS / "panel-conversation.png")
        await page.goto(f"{url}/panel/knowledge/{source}")
        await page.screenshot(path=DOCS / "panel-source.png")
        await judge(page, url)
        await page.goto(url + "/panel/overview")
        await page.screenshot(path=DOCS / "panel-overview.png", full_page=True)


def main() -> int:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        env |= {"VIGIL_HTTP__PORT": str(port), "VIGIL_DATA_DIR": tmp, "VIGIL_DEMO__PACE_S": "0.7"}
        demo = subprocess.Popen(
            [str(VIGIL), "demo"], env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        try:
            wait_ready(url)
            time.sleep(45)  # let the demo conversations play for a while, so the views have something to show
            asyncio.run(shoot(url))
        finally:
            demo.send_signal(signal.SIGINT)
            demo.wait(30)
    print("wrote", ", ".join(sorted(p.name for p in DOCS.glob("panel-*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
