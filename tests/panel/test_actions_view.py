"""A case's actions on the conversation page: each card shows exactly the arguments that will run and where each
came from, the verdict with its rule, who must approve and the time left; Approve and Reject appear only for a
person the API would let use them; the audit log reads in order. In process with seeded stores, and in headless
Chromium on the real pipeline (vigil.testing.wired) against the demo's systems, where a lead approves a held refund
and its card shows it executed."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi import FastAPI
from playwright.async_api import Browser, Page, expect
from prometheus_client import CollectorRegistry

from tests.actions.systems import Shop, shop  # noqa: F401 (a fixture)
from tests.actions.test_skill import T0, Chat
from tests.browser import chromium
from tests.panel.test_actions import put
from tests.panel.test_routes import NOW, panel_client, say, served
from vigil.app.settings import Settings
from vigil.cases import actions as stored
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.core.metrics import Metrics
from vigil.panel.actions_view import origin, result_words
from vigil.panel.auth import token_digest
from vigil.panel.display import Display
from vigil.panel.settings import PanelSettings, PanelUser
from vigil.testing import Wired, panel_app, wired
from vigil.transport.memory import MemoryOutbox

TOKENS = {"ana": "ana-acme-analyst", "lia": "lia-acme-lead", "ada": "ada-acme-admin"}
USERS = [
    PanelUser(name="ana", role="analyst", tenants=["acme"], token_sha256=token_digest(TOKENS["ana"])),
    PanelUser(name="lia", role="lead", tenants=["acme"], token_sha256=token_digest(TOKENS["lia"])),
    PanelUser(name="ada", role="admin", tenants=["acme"], token_sha256=token_digest(TOKENS["ada"])),
]
SEEN = 15_000  # ms
# One case, an action in every standing that matters: who may approve, who may reject (refund amounts tell them apart).
KINDS: dict[str, dict[str, object]] = {
    "analyst_approves": {"approver": "analyst"},
    "lead_approves": {"approver": "lead", "rule": "large_refund_needs_lead"},
    "admin_approves": {"approver": "admin", "rule": "huge_refund_needs_admin"},
    "allowed": {"verdict": "allow", "rule": "small_refund", "approver": None},
    "waiting": {"verdict": "deny", "rule": "identity_not_verified", "approver": None},
    "declined": {"verdict": "deny", "rule": "order_of_another_customer", "status": "declined", "approver": None},
    "blocked": {"verdict": "blocked", "rule": "account_takeover_redirect", "status": "blocked", "approver": None},
    "expired": {"approver": "analyst", "expires_at": NOW - timedelta(seconds=1)},
    "executed": {"approver": "analyst", "status": "executed"},
    "in_doubt": {"approver": "analyst", "status": "in_doubt"},
    "resumable": {"approver": "analyst", "status": "approved"},
}
OPEN = {"analyst_approves", "lead_approves", "admin_approves", "allowed", "waiting"}
RESUMES = {"resumable"}  # approved, its run never started: approving again runs it ("Run it now")
APPROVES = {
    "ana": {"analyst_approves", "allowed", *RESUMES},
    "lia": {"analyst_approves", "allowed", "lead_approves", *RESUMES},
    "ada": {"analyst_approves", "allowed", "lead_approves", "admin_approves", *RESUMES},
}
HOSTILE = "<img src=x onerror=alert(1)>"


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
async def acting(store: CaseStore) -> dict[str, str]:
    """The case ``acts`` of acme with one action of each kind; their ids by kind."""
    await say(store, "acts", "acme", 1, f"please refund ORD-1 {HOSTILE}")
    ids = {}
    for n, (kind, changes) in enumerate(KINDS.items()):
        provenance = {
            "order_id": {"source": "message", "message_id": "acts-m1", "role": "customer", "quote": "ORD-1"},
            "amount_cents": {"source": "orders", "call": "GET /orders/ORD-1", "field": "refundable_cents"},
        }
        action = await put(store, "acts", "acme", amount=1000 + n, provenance=provenance, **changes)
        ids[kind] = action.action_id
    return ids


class Buttons(HTMLParser):
    """The decision buttons of each action card on a page: ``{action_id: {"approve", "reject"}}``."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, set[str]] = {}
        self._card: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "li" and "action-card" in (a.get("class") or ""):
            self._card = a["data-action-id"] or ""
            self.found[self._card] = set()
        elif tag == "button" and a.get("data-decide") and self._card:
            self.found[self._card].add(a["data-decide"] or "")


def buttons(page: str) -> dict[str, set[str]]:
    parser = Buttons()
    parser.feed(page)
    return parser.found


@pytest.mark.parametrize("who", ["ana", "lia", "ada"])
async def test_approve_and_reject_are_offered_exactly_where_the_api_would_take_them(
    acting: dict[str, str],
    store: CaseStore,
    registry,  # type: ignore[no-untyped-def]
    who: str,
):
    outbox = MemoryOutbox()
    async with panel_client(store, outbox, registry, users=USERS) as client:
        page = await client.get("/panel/conversations/acts", headers=auth(who))
        assert page.status_code == 200
        offered = buttons(page.text)
        kinds = {action_id: kind for kind, action_id in acting.items()}
        assert {kinds[a] for a, b in offered.items() if "approve" in b} == APPROVES[who]
        assert {kinds[a] for a, b in offered.items() if "reject" in b} == OPEN
        # The API agrees with every button shown, and with every button not shown.
        async with store.engine.connect() as conn:
            records = {r.action_id: r for r in await stored.of_conversation(conn, "acts")}
        for action_id, shown in offered.items():
            body = {"arguments_hash": records[action_id].arguments_hash}
            for decision in ("approve", "reject"):
                answer = await client.post(f"/api/actions/{action_id}/{decision}", json=body, headers=auth(who))
                assert (answer.status_code == 202) == (decision in shown), (kinds[action_id], decision, answer.text)


async def test_a_card_shows_what_will_run_where_it_came_from_the_rule_and_the_time_left(
    acting: dict[str, str],
    store: CaseStore,
    registry,  # type: ignore[no-untyped-def]
):
    async with panel_client(store, MemoryOutbox(), registry, users=USERS) as client:
        page = (await client.get("/panel/conversations/acts", headers=auth("ana"))).text
        alone = await client.get("/panel/actions/acts", headers=auth("ana"))
        assert (await client.get("/panel/actions/nobodys", headers=auth("ana"))).status_code == 404
    section = re.search(r'<section class="actions-panel" id="actions".*?</section>', page, re.S)
    assert section and alone.status_code == 200 and "<html" not in alone.text
    # The same section, but for the countdowns: the two reads may fall either side of a second.
    ticking = re.compile(r"(\d+[hms] ?)+(?=left|</span>)|overdue by [^<]*")
    alone_section = re.search(r"<section.*</section>", alone.text, re.S).group(0)  # type: ignore[union-attr]
    assert ticking.sub("T", section.group(0)) == ticking.sub("T", alone_section)
    card = re.search(rf'<li class="action-card" data-action-id="{acting["lead_approves"]}".*?</li>\s*\n', page, re.S)
    assert card
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", card.group(0))).split())
    assert "Refund order refund_order" in text  # no card text stored: its name, in words
    assert "order_id ORD-1 from the customer's message: ORD-1" in text
    assert "amount_cents 1001 (10.01) from orders: GET /orders/ORD-1 → refundable_cents" in text
    assert "Needs approval by rule large_refund_needs_lead : Refunds move money." in text
    assert "A lead (or above) must approve it." in text
    assert re.search(r"Waiting for a decision · expires [^·]+ · (59m \d\ds|1h 00m) left", text), text
    declined = re.search(rf'data-action-id="{acting["declined"]}".*?</li>', page, re.S)
    assert declined and "Declined by the policy: it cannot run" in declined.group(0)
    waiting = re.search(rf'data-action-id="{acting["waiting"]}".*?</li>', page, re.S)
    assert waiting and "Waiting for the conversation" in waiting.group(0)
    doubtful = re.search(rf'data-action-id="{acting["in_doubt"]}".*?</li>', page, re.S)
    assert doubtful and "In doubt: the system may have done it" in doubtful.group(0)
    assert "Running" not in doubtful.group(0)
    audit = re.search(r'<details class="audit" id="audit-log">.*?</details>', page, re.S)
    assert audit and audit.group(0).count('data-step="suggested"') == len(KINDS)
    assert HOSTILE not in page  # the customer's words are text, never markup


def test_where_an_argument_came_from_is_said_for_people():
    assert origin({"source": "message", "message_id": "m1", "role": "customer", "quote": "ORD-10001"}) == (
        "from the customer's message: ORD-10001"
    )
    assert origin({"source": "orders", "call": "GET /orders/ORD-10001", "field": "refundable_cents"}) == (
        "from orders: GET /orders/ORD-10001 → refundable_cents"
    )
    assert origin({"source": "budget", "detail": "1000 cents merited, 100% offered"}) == (
        "from the concession budget: 1000 cents merited, 100% offered"
    )
    assert origin({"source": "rulebook", "detail": "a fixed value"}) == "from the rulebook: a fixed value"
    assert origin({"source": "metadata", "message_id": "m1", "field": "customer_id"}) == (
        "from the message's metadata: customer_id"
    )
    assert origin(None) == "where it came from was not recorded"


# ---- in the browser, on the real pipeline ----
class IntoPipeline:
    """The panel's outbox onto the wired pipeline's input: a decision is taken as the daemon would take it."""

    name = "pipeline"

    def __init__(self, vigil: Wired) -> None:
        self.vigil = vigil

    async def submit(self, value: bytes, *, tenant: str, conversation_id: str) -> None:
        await self.vigil.send(value)


def panel_over(vigil: Wired) -> FastAPI:
    """The panel over ``vigil``'s stores, its decisions fed into ``vigil``'s pipeline and signed with its key."""
    return panel_app(
        views=vigil.views,
        metrics=Metrics(CollectorRegistry()),
        clock=vigil.clock,
        feed=vigil.feed,
        outboxes=[IntoPipeline(vigil)],
        panel=PanelSettings(auth="tokens", users=USERS),
        proofs=vigil.parts.proofs,
    )


async def signed_in(browser: Browser, url: str, who: str) -> Page:
    """A new page of ``browser``, signed in as ``who`` with their token, on conversation c-1."""
    page = await browser.new_page(viewport={"width": 1366, "height": 900})
    await page.goto(f"{url}/login?next=/panel/conversations/c-1")
    await page.get_by_label("Your access token").fill(TOKENS[who])
    await page.get_by_role("button", name="Sign in").click()
    return page


@pytest.fixture
async def acting_vigil(tmp_path: Path, shop: Shop) -> AsyncIterator[Wired]:  # noqa: F811
    systems = {name: {"base_url": shop.url, "timeout_s": 5} for name in ("orders", "billing", "crm")}
    settings = Settings(
        _env_file=None, answers={"enabled": False}, progress={"enabled": False}, actions={"systems": systems}
    )
    capabilities = ["cases", "actions", "live"]
    async with wired(tmp_path, settings=settings, clock=ManualClock(T0), capabilities=capabilities) as running:
        yield running


async def test_in_the_browser_an_analyst_may_approve_only_their_own_and_a_lead_approves_a_held_refund(
    acting_vigil: Wired,
    shop: Shop,  # noqa: F811
):
    vigil = acting_vigil
    chat = Chat(vigil)
    await chat.say("customer", "I was charged for order ORD-10001 but want my money back")
    await chat.say("analyst", "Thanks, your identity is now verified.", author="raj")
    await chat.say("analyst", "I can refund 89.99 for ORD-10001 to your Visa. Shall I go ahead?", author="raj")
    await chat.say("customer", "yes please")
    await chat.say("customer", "Also I've had no internet for three days, I want compensation")
    await chat.say(
        "analyst", "Sorry about that: I can add a goodwill credit of 10.00 for the outage, ok?", author="ana"
    )
    await chat.say("customer", "yes")
    cards = {c.action.model_dump()["name"]: c.action.model_dump() for c in chat.cards() if c.action}
    refund, credit = cards["refund_order"], cards["issue_credit"]
    assert (refund["approver"], credit["approver"]) == ("lead", "analyst")
    app = panel_over(vigil)
    async with served(app) as url, chromium() as browser:
        for who in ("ana", "lia"):
            page = await signed_in(browser, url, who)
            await expect(page.locator("body[data-live=on]")).to_have_count(1, timeout=SEEN)
            held = page.locator(f'.action-card[data-action-id="{refund["action_id"]}"]')
            mine = page.locator(f'.action-card[data-action-id="{credit["action_id"]}"]')
            await expect(held.locator(".title strong")).to_have_text("Refund £89.99 on order ORD-10001")
            await expect(held.locator('[data-argument="order_id"] .origin')).to_have_text(
                "from the customer's message: ORD-10001"
            )
            await expect(held.locator(".approver")).to_have_text("A lead (or above) must approve it.")
            await expect(held.locator(".countdown")).to_have_text(re.compile(r"^\d+m \d\ds left$"))
            await expect(held.get_by_role("button", name="Reject")).to_be_visible()
            if who == "ana":  # the analyst: not the refund a lead approves, nor the credit she read back herself
                await expect(held.get_by_role("button", name="Approve")).to_have_count(0)
                await expect(mine.get_by_role("button", name="Approve")).to_have_count(0)
                await expect(mine.locator(".kept-out")).to_have_text(
                    "ana proposed and read back this action; another person approves it."
                )
                await expect(mine.get_by_role("button", name="Reject")).to_be_visible()
                await page.goto("about:blank")
                continue
            await expect(mine.get_by_role("button", name="Approve")).to_be_visible()  # a second person's
            await held.get_by_role("button", name="Approve").click()
            await expect(held.locator(".status")).to_have_text("Executed", timeout=SEEN)
            await expect(held.locator(".decided")).to_contain_text("by lia")
            await expect(held.get_by_role("button")).to_have_count(0)
            done = page.locator('.card[data-kind="action"]', has_text="Refund £89.99 on order ORD-10001. Done.")
            await expect(done.get_by_role("link", name="Decide it under Actions")).to_have_count(0)
            await page.locator("#audit-log summary").click()
            steps = page.locator("#audit-log tbody tr")
            await expect(steps.filter(has_text="approved")).to_contain_text("lia (lead)")
            await page.goto("about:blank")  # a live stream would hold the server open
    assert shop.refunds("ORD-10001") == [8999]


async def test_in_the_browser_a_disguised_request_says_so_and_only_an_admin_may_approve_it(
    acting_vigil: Wired,
    shop: Shop,  # noqa: F811
):
    """Look-alike letters (a Cyrillic O, U+041E, in the order id) are read as they look; the card says the text was
    disguised, and neither the analyst nor the lead gets an Approve button: only an admin may approve it."""
    vigil = acting_vigil
    chat = Chat(vigil)
    await chat.say("customer", "I want my money back for \u041eRD-10001, it broke")  # U+041E: a Cyrillic capital O
    await chat.say("analyst", "Thanks, your identity is now verified.", author="raj")
    await chat.say("analyst", "I can refund 89.99 for ORD-10001 to your Visa. Shall I go ahead?", author="raj")
    await chat.say("customer", "yes please")
    [refund] = [c.action.model_dump() for c in chat.cards()[-1:] if c.action]
    assert (refund["name"], refund["approver"], refund["disguised"]) == (
        "refund_order",
        "admin",
        ["used letters of another script that look Latin"],
    )
    app = panel_over(vigil)
    async with served(app) as url, chromium() as browser:
        for who, may in (("lia", False), ("ada", True)):
            page = await signed_in(browser, url, who)
            card = page.locator(f'.action-card[data-action-id="{refund["action_id"]}"]')
            await expect(card.locator(".disguised")).to_contain_text(
                "used letters of another script that look Latin; it was read as it looks, and only an admin may"
            )
            await expect(card.locator(".approver")).to_have_text("An admin (or above) must approve it.")
            await expect(card.get_by_role("button", name="Approve")).to_have_count(1 if may else 0)
            await page.goto("about:blank")


def test_what_the_system_answered_is_said_in_words_with_money_in_the_tenants_currency():
    answered = {
        "refund_id": "RF-70004",
        "amount_cents": 6249,
        "status": "completed",
        "lines": [1, 2],
        "order": {"id": "ORD-10005", "items": []},
        "meta": {"trace": "x"},
    }
    assert result_words(answered, Display(currency="GBP")) == (
        "Refund id: RF-70004 · Amount: £62.49 · Status: completed · Lines: 2 items · Order: ORD-10005"
    )
    assert result_words({"amount_cents": 1001}, Display()) == "Amount: 10.01"  # no currency set: none made up
