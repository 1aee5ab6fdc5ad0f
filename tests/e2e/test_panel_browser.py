"""The panel in a real headless Chromium (Debian's, driven by Playwright) against `vigil run` on Kafka.

One daemon serves the module (the answer skill loads its model once): analysts sign in with their tokens, watch
messages and suggestions arrive live, accept, edit and dismiss, and never see another tenant's conversations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from playwright.async_api import Browser, Page, expect
from prometheus_client import CollectorRegistry

from tests.browser import chromium
from tests.conftest import Topics, create_topics, new_topics, open_knowledge, views_of
from tests.e2e.harness import VigilCli, VigilProcess, eventually, message, ready, record
from tests.kafka_client import produce
from tests.mining.test_miner import START as MINING_START
from tests.mining.test_miner import conversation as mining_case
from tests.mining.test_miner import parcel_case
from tests.mining.test_miner import record as record_events
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, OidcProvider
from vigil.app.health import Health
from vigil.app.http import EmbeddedServer
from vigil.cases.paging import DEFAULT_PAGE
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.core.metrics import Metrics
from vigil.dev.broker import EmbeddedBroker, free_port
from vigil.flow.feed import LiveFeed, Update, recorded
from vigil.knowledge.documents import read
from vigil.knowledge.store import KnowledgeStore
from vigil.mining.miner import Miner, entry_id
from vigil.mining.settings import MinerSettings
from vigil.panel.auth import token_digest
from vigil.panel.display import Display
from vigil.panel.settings import PanelSettings
from vigil.testing import panel_app
from vigil.wire.events import DRAFT_MARK, SourceRef, Suggestion, parse

pytestmark = pytest.mark.e2e

KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"
TOKENS = {"ana": uuid.uuid4().hex, "lee": uuid.uuid4().hex}
USERS = [
    {"name": "ana", "role": "analyst", "tenants": ["acme"], "token_sha256": token_digest(TOKENS["ana"])},
    {"name": "lee", "role": "lead", "tenants": ["acme", "globex"], "token_sha256": token_digest(TOKENS["lee"])},
]
SEEN = 15_000  # ms: generous, the machine is shared; latency is measured in bench/panel.py, not here


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class Panel:
    """The running daemon, its topics, and a way to put chat events on its input topic."""

    def __init__(self, daemon: VigilProcess, bootstrap: str, topics: Topics) -> None:
        self.daemon = daemon
        self.bootstrap = bootstrap
        self.topics = topics
        self.url = daemon.base_url

    def say(self, conversation: str, text: str, *, tenant: str = "acme", role: str = "customer") -> str:
        message_id = f"{conversation}-{uuid.uuid4().hex[:8]}"
        event = message(conversation, message_id, text, role=role, sent_at=now(), tenant=tenant, author="Sam")
        produce(self.bootstrap, self.topics.input, [record(event)])
        return message_id

    def api(self, path: str, who: str = "ana") -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=5)

    async def stored(self, conversation: str, who: str = "ana") -> None:
        path = f"/api/conversations/{conversation}"
        await eventually(f"{conversation} stored", lambda: self.api(path, who).status_code == 200, 20, self.daemon)


@pytest.fixture(scope="module")
async def browser_daemon(kafka: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Panel]:
    topics = new_topics()
    await create_topics(kafka.bootstrap, topics)
    tmp = tmp_path_factory.mktemp("panel")
    cli = VigilCli(tmp)
    try:
        daemon = cli.daemon(
            kafka.bootstrap,
            topics,
            f"sqlite+aiosqlite:///{tmp / 'vigil.db'}",
            VIGIL_ANSWERS__ENABLED="true",
            VIGIL_KNOWLEDGE__PATHS=json.dumps([str(KNOWLEDGE / "articles"), str(KNOWLEDGE / "faqs")]),
            VIGIL_PANEL__AUTH="tokens",
            VIGIL_PANEL__USERS=json.dumps(USERS),
        )
        await ready(daemon, timeout_s=120)
        yield Panel(daemon, kafka.bootstrap, topics)
    finally:
        cli.kill_all()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1366, "height": 860})
    tab = await context.new_page()
    try:
        yield tab
    finally:
        await context.close()


async def sign_in(page: Page, panel: Panel, who: str, path: str = "/panel") -> None:
    await page.goto(panel.url + path)
    await expect(page).to_have_url(f"{panel.url}/login?next={path}")
    await page.get_by_label("Your access token").fill(TOKENS[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(panel.url + path)
    if not path.startswith("/panel/overview"):  # the pages that stream updates say when they are live
        await expect(page.locator("#live-status")).to_have_text("Live", timeout=SEEN)


async def test_an_unauthenticated_browser_is_sent_to_sign_in_and_the_api_refuses_it(page: Page, browser_daemon: Panel):
    await page.goto(browser_daemon.url + "/panel/overview")
    await expect(page).to_have_url(f"{browser_daemon.url}/login?next=/panel/overview")
    await expect(page.get_by_label("Your access token")).to_be_visible()
    for path in ("/api/queue", "/api/live", "/api/conversations"):
        answer = await page.request.get(browser_daemon.url + path)
        assert answer.status == 401, path
    await page.get_by_label("Your access token").fill("not a token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_have_text("That token is not valid.")


async def test_an_analyst_sees_a_message_and_its_suggestion_live_and_accepts_it(page: Page, browser_daemon: Panel):
    panel = browser_daemon
    conversation = f"acme-{uuid.uuid4().hex[:6]}"
    await sign_in(page, panel, "ana")

    # Produced on Kafka while the queue is open: the conversation appears without a reload.
    panel.say(conversation, "hi, I'm moving house next month")
    row = page.locator(f'tr[data-conversation-id="{conversation}"]')
    await expect(row).to_be_visible(timeout=SEEN)
    await row.get_by_role("link").click()
    await expect(page.locator(".msg.customer .text")).to_have_text(["hi, I'm moving house next month"])

    # The question arrives while the conversation is open: message, then vigil's suggestion, live.
    question = panel.say(conversation, "Can I take my broadband with me when I move?")
    await expect(page.locator(f'[data-message-id="{question}"]')).to_be_visible(timeout=SEEN)
    card = page.locator(".card").first
    await expect(card).to_be_visible(timeout=SEEN)
    await expect(card.locator(".kind")).to_have_text("Suggested answer")
    await expect(card.locator(".why")).to_contain_text("FAQ")
    source = card.locator(".sources a").first
    await expect(source).to_have_attribute("href", "/panel/knowledge/faq-moving-home")
    suggestion_id = await card.get_attribute("data-suggestion-id")
    text = (await card.locator(".text").text_content()) or ""
    assert text.strip()

    accepted = panel.daemon.metric("vigil_feedback_total", kind="answer", verdict="accepted")
    await card.get_by_role("button", name="Accept").click()
    await expect(page.get_by_label("Your reply")).to_have_value(text)
    await expect(card.locator(".verdict")).to_contain_text("Accepted", timeout=SEEN)

    # Stored (through the input topic) and counted.
    def stored() -> list[dict[str, object]]:
        view = panel.api(f"/api/conversations/{conversation}").json()
        return [f for f in view["feedback"] if f["suggestion_id"] == suggestion_id]

    await eventually("the feedback stored", stored, 20, panel.daemon)
    (verdict,) = stored()
    assert (verdict["verdict"], verdict["by"]) == ("accepted", "ana")
    assert panel.daemon.metric("vigil_feedback_total", kind="answer", verdict="accepted") == accepted + 1

    # The source opens the FAQ it cites.
    async with page.context.expect_page() as opened:
        await source.click()
    faq = await opened.value
    await expect(faq.get_by_role("heading", level=1)).to_have_text("Can I take my broadband with me when I move?")


async def test_a_suggestion_is_unread_in_the_queue_until_the_analyst_opens_its_conversation(
    page: Page, browser_daemon: Panel
):
    panel = browser_daemon
    conversation = f"acme-{uuid.uuid4().hex[:6]}"
    await sign_in(page, panel, "ana")

    panel.say(conversation, "Can I take my broadband with me when I move?")
    badge = page.locator(f'tr[data-conversation-id="{conversation}"] .badge')
    await expect(badge).to_have_text("1", timeout=SEEN)

    def unread(who: str) -> list[str]:
        queue = panel.api("/api/queue", who).json()
        return next(c["unread_suggestions"] for c in queue if c["conversation_id"] == conversation)

    assert len(unread("lee")) == 1
    await page.locator(f'tr[data-conversation-id="{conversation}"]').get_by_role("link").click()
    await expect(page.locator(".card")).to_have_count(1, timeout=SEEN)
    await eventually("read in the panel", lambda: unread("ana") == [], 10, panel.daemon)
    await page.go_back()
    await expect(badge).to_have_text("0", timeout=SEEN)
    assert len(unread("lee")) == 1  # read by ana, still unread to the lead


async def test_edit_then_accept_and_dismiss_with_a_reason_are_stored(page: Page, browser_daemon: Panel):
    panel = browser_daemon
    conversation = f"acme-{uuid.uuid4().hex[:6]}"
    panel.say(conversation, "When do you take the money for my bill?")
    await panel.stored(conversation)
    await sign_in(page, panel, "ana", f"/panel/conversations/{conversation}")
    first = page.locator(".card").first
    await expect(first).to_be_visible(timeout=SEEN)
    await first.get_by_role("button", name="Edit").click()
    editor = first.get_by_label("Edit the suggestion")
    await editor.fill("We take payment on the 1st of each month.")
    await first.get_by_role("button", name="Accept edited").click()
    await expect(page.get_by_label("Your reply")).to_have_value("We take payment on the 1st of each month.")
    await expect(first).to_have_attribute("data-state", "edited", timeout=SEEN)

    panel.say(conversation, "How do I install my eSIM?")
    fresh = page.locator(".card[data-state='new']").first
    await expect(fresh).to_be_visible(timeout=SEEN)
    second = page.locator(f'.card[data-suggestion-id="{await fresh.get_attribute("data-suggestion-id")}"]')
    await second.get_by_role("button", name="Dismiss").click()
    await second.get_by_label("Why dismiss it? (optional)").fill("customer has a physical SIM")
    await second.get_by_role("button", name="Confirm dismiss").click()
    await expect(second).to_have_attribute("data-state", "dismissed", timeout=SEEN)
    # The reason shows on the card, and stays once the stored verdict comes back live with its author.
    await expect(second.locator(".verdict")).to_have_text("Dismissed by ana: customer has a physical SIM", timeout=SEEN)

    def verdicts() -> dict[str, tuple[str, str | None]]:
        view = panel.api(f"/api/conversations/{conversation}").json()
        return {f["verdict"]: (f["by"], f["text"]) for f in view["feedback"]}

    await eventually("both verdicts stored", lambda: len(verdicts()) == 2, 20, panel.daemon)
    assert verdicts() == {
        "edited": ("ana", "We take payment on the 1st of each month."),
        "dismissed": ("ana", "customer has a physical SIM"),
    }

    # Someone else judges a card while this analyst has its dismissal form open: the form goes, and the card cannot
    # be judged a second time.
    panel.say(conversation, "Can I take my broadband with me when I move?")
    third = page.locator(".card[data-state='new']").first
    await expect(third).to_be_visible(timeout=SEEN)
    suggestion_id = await third.get_attribute("data-suggestion-id")
    third = page.locator(f'.card[data-suggestion-id="{suggestion_id}"]')
    await third.get_by_role("button", name="Dismiss").click()
    elsewhere = httpx.post(
        f"{panel.url}/api/suggestions/{suggestion_id}/feedback",
        json={"verdict": "accepted"},
        headers={"Authorization": f"Bearer {TOKENS['lee']}"},
        timeout=5,
    )
    assert elsewhere.status_code == 202
    await expect(third.locator(".verdict")).to_have_text("Accepted by lee", timeout=SEEN)
    await expect(third.get_by_role("button")).to_have_count(0)


async def test_a_script_in_a_customer_message_is_shown_as_text(page: Page, browser_daemon: Panel):
    panel = browser_daemon
    conversation = f"acme-{uuid.uuid4().hex[:6]}"
    hostile = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold?</b>'
    panel.say(conversation, "hello there")
    await panel.stored(conversation)
    await sign_in(page, panel, "ana", f"/panel/conversations/{conversation}")
    live_id = panel.say(conversation, hostile)  # arrives live
    await expect(page.locator(f'[data-message-id="{live_id}"] .text')).to_have_text(hostile, timeout=SEEN)
    for how in ("live", "from the page's data"):
        assert await page.evaluate("window.pwned") is None, how
        assert await page.locator("#messages img, #messages script, #messages b").count() == 0, how
        if how == "live":
            await page.reload()
            await expect(page.locator(f'[data-message-id="{live_id}"] .text')).to_have_text(hostile)


async def test_another_tenants_conversation_is_refused(page: Page, browser_daemon: Panel):
    panel = browser_daemon
    theirs = f"globex-{uuid.uuid4().hex[:6]}"
    panel.say(theirs, "Where is my parcel? It's private.", tenant="globex")
    await panel.stored(theirs, who="lee")
    await sign_in(page, panel, "ana")
    await expect(page.locator(f'tr[data-conversation-id="{theirs}"]')).to_have_count(0)
    answer = await page.goto(f"{panel.url}/panel/conversations/{theirs}")
    assert answer is not None and answer.status == 404
    await expect(page.locator("body")).not_to_contain_text("parcel")
    assert panel.api(f"/api/conversations/{theirs}").status_code == 404
    assert (await page.request.get(f"{panel.url}/api/conversations/{theirs}")).status == 404


async def test_a_lead_sees_the_overview_with_charts(page: Page, browser_daemon: Panel):
    await sign_in(page, browser_daemon, "lee", "/panel/overview")
    await expect(page.get_by_role("heading", level=1)).to_have_text("What vigil is worth")
    charts = page.locator("figure svg[role='img']")
    for title in ("Suggestions shown", "Answer latency", "Time to first response", "Knowledge size"):
        await expect(charts.filter(has_text=title)).to_have_count(1)
    await expect(page.get_by_text("median time to first response, in real time")).to_be_visible()
    await expect(page.get_by_text("first responses within the SLA's target, as its clock counts")).to_be_visible()
    await page.get_by_role("link", name="Last 7d").click()
    await expect(page).to_have_url(browser_daemon.url + "/panel/overview?window=7d")


async def test_signing_in_through_the_oidc_provider(
    page: Page, vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    port = free_port()
    callback = f"http://127.0.0.1:{port}/auth/oidc/callback"
    async with OidcProvider(redirect_uri=callback) as provider:
        provider.user = {"sub": "u-9", "email": "lee@acme.example", "tenant": ["acme"], "vigil_role": "lead"}
        await create_topics(kafka.bootstrap, topics)
        daemon = vigil.daemon(
            kafka.bootstrap,
            topics,
            sqlite_url,
            VIGIL_HTTP__PORT=str(port),
            VIGIL_PANEL__AUTH="oidc",
            VIGIL_PANEL__OIDC__ISSUER=provider.issuer,
            VIGIL_PANEL__OIDC__CLIENT_ID=CLIENT_ID,
            VIGIL_PANEL__OIDC__CLIENT_SECRET=CLIENT_SECRET,
            VIGIL_PANEL__OIDC__REDIRECT_URL=callback,
        )
        await ready(daemon, timeout_s=60)
        # Not signed in: the panel sends the browser to the provider, which sends it back signed in.
        await page.goto(daemon.base_url + "/panel/overview")
        await expect(page).to_have_url(daemon.base_url + "/panel/overview")
        await expect(page.locator(".who")).to_contain_text("lee@acme.example")
        await expect(page.locator(".role")).to_have_text("lead")
        assert provider.reads["token"] == 1
        # A refusal at the provider is shown, and leaves the browser signed out.
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("status")).to_have_text("You are signed out.")
        provider.deny = "access_denied"
        await page.get_by_role("link", name="Sign in with your company account").click()
        await expect(page.get_by_role("alert")).to_contain_text("access_denied")
        assert (await page.request.get(daemon.base_url + "/api/whoami")).status == 401


# ---- a long conversation, a page at a time; a machine-written draft says so on its card ----
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@contextlib.asynccontextmanager
async def in_process_panel(
    store: CaseStore,
    page: Page,
    feed: LiveFeed | None = None,
    knowledge: KnowledgeStore | None = None,
    panel: PanelSettings | None = None,
) -> AsyncIterator[str]:
    """The panel of ``store`` served in this process, without sign-in; its base URL. The page is sent away from it
    before it stops (a live stream would hold the server open)."""
    metrics = Metrics(CollectorRegistry())
    app = panel_app(
        views=views_of(store),
        health=Health({}, clock=SystemClock(), metrics=metrics, interval_s=1),
        metrics=metrics,
        panel=panel or PanelSettings(auth="none"),
        feed=feed,
        knowledge=knowledge,
    )
    listener = socket.create_server(("127.0.0.1", 0))
    server = EmbeddedServer(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        await page.goto("about:blank")
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


async def say_in(store: CaseStore, conversation: str, numbers: range) -> list[Update]:
    """Store messages ``message N`` in ``conversation``; the live updates the pipeline would have sent for them."""
    updates = []
    for n in numbers:
        raw = message(
            conversation,
            f"{conversation}-m{n:03d}",
            f"message {n}",
            sent_at=f"2026-11-30T{9 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
        )
        event = parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
        result = await store.record(event)
        assert result.case is not None
        updates.append(recorded(event, result.case))
    return updates


async def test_a_long_conversation_shows_its_newest_page_then_earlier_ones_and_labels_drafts(
    page: Page,
    store: CaseStore,
):
    total = DEFAULT_PAGE * 2 + 10
    await say_in(store, "long", range(total))
    for sid, why in (("s-drafted", f"{DRAFT_MARK}: esim-setup"), ("s-faq", "matches the FAQ “eSIM”")):
        made = datetime(2026, 11, 30, 10, 0, 0 if sid == "s-faq" else 1, tzinfo=UTC)
        await store.save_suggestion(
            Suggestion(
                suggestion_id=sid,
                conversation_id="long",
                tenant="default",
                in_reply_to=f"long-m{total - 1:03d}",
                created_at=made,
                kind="answer",
                text="Scan the QR code [esim-setup].",
                why=why,
                confidence=0.8,
                latency_ms=5.0,
            )
        )
    async with in_process_panel(store, page) as url:
        await page.goto(f"{url}/panel/conversations/long")
        texts = page.locator(".msg .text")
        await expect(texts).to_have_count(DEFAULT_PAGE)
        await expect(texts.last).to_have_text(f"message {total - 1}")  # the newest at the bottom, as in a chat
        earlier = page.get_by_role("button", name="Show earlier messages")
        await earlier.click()
        await expect(texts).to_have_count(DEFAULT_PAGE * 2, timeout=SEEN)
        await earlier.click()
        await expect(texts).to_have_count(total, timeout=SEEN)
        await expect(earlier).to_be_hidden()  # the start of the conversation is here
        assert await texts.all_text_contents() == [f"message {n}" for n in range(total)]

        drafted = page.locator('.card[data-suggestion-id="s-drafted"]')
        await expect(drafted.get_by_role("note")).to_have_text("Drafted by AI from the sources")
        await expect(page.locator('.card[data-suggestion-id="s-faq"] .drafted')).to_have_count(0)


async def test_after_missing_more_than_a_page_live_the_conversation_shows_no_gap(page: Page, store: CaseStore):
    shown = DEFAULT_PAGE + 10
    await say_in(store, "gap", range(shown))
    feed = LiveFeed(max_queue=5)
    async with in_process_panel(store, page, feed) as url:
        await page.goto(f"{url}/panel/conversations/gap")
        texts = page.locator(".msg .text")
        await expect(texts.last).to_have_text(f"message {shown - 1}")
        await expect(page.locator("body[data-live=on]")).to_have_count(1, timeout=SEEN)
        # More than a page arrives at once: the page's stream falls behind, is dropped, and reconnects.
        missed = await say_in(store, "gap", range(shown, shown + DEFAULT_PAGE + 20))
        for update in missed:
            feed.publish(update)
        last = shown + DEFAULT_PAGE + 20 - 1
        await expect(texts.last).to_have_text(f"message {last}", timeout=SEEN)
        numbers = [int(text.split()[1]) for text in await texts.all_text_contents()]
        assert numbers == list(range(numbers[0], last + 1)), "a message is missing between two shown"
        earlier = page.get_by_role("button", name="Show earlier messages")
        while await earlier.is_visible():
            count = await texts.count()
            await earlier.click()
            await expect(texts).not_to_have_count(count, timeout=SEEN)
        assert await texts.all_text_contents() == [f"message {n}" for n in range(last + 1)]


# ---- a knowledge source as Markdown; a card's one number and a dismissal's reason ----
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_knowledge_page_shows_its_lists_as_lists_and_runs_nothing_from_the_article(
    page: Page,
    store: CaseStore,
    embedder,
    tmp_path: Path,  # type: ignore[no-untyped-def]
):
    article = tmp_path / "hub-lights.md"
    article.write_text(
        "---\nid: hub-lights\ntitle: What the lights mean\nproduct: broadband\n---\n"
        "A **solid amber** light means no signal.\n\n- Check the cable\n- Look at the wall box\n\n"
        '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">\n\n'
        '<a href="javascript:window.pwned = 3" id="bad">click</a> <b onclick="window.pwned = 4">bold</b>\n',
        encoding="utf-8",
    )
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)
    await knowledge.upsert(read(article))
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    async with in_process_panel(store, page, knowledge=knowledge) as url:
        await page.goto(f"{url}/panel/knowledge/hub-lights")
        body = page.locator("#entry-body")
        items = body.locator("ul > li")
        await expect(items).to_have_text(["Check the cable", "Look at the wall box"])
        assert await items.first.evaluate("li => getComputedStyle(li).display") == "list-item"
        await expect(body.locator("strong")).to_have_text("solid amber")
        assert await body.locator("script, img, [onclick], [onerror]").count() == 0
        await body.get_by_text("click").click()
        await body.get_by_text("bold").click()
        assert await page.evaluate("window.pwned") is None
        await expect(page).to_have_url(f"{url}/panel/knowledge/hub-lights")
    assert problems == []  # no script error and no CSP refusal: there was nothing to refuse


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_card_shows_one_labelled_confidence_and_a_dismissals_reason(page: Page, store: CaseStore):
    await say_in(store, "judged", range(1))
    await store.save_suggestion(
        Suggestion(
            suggestion_id="s-judged",
            conversation_id="judged",
            tenant="default",
            in_reply_to="judged-m000",
            created_at=datetime(2026, 11, 30, 10, 0, tzinfo=UTC),
            kind="answer",
            text="Restart the Hub once.",
            why="from “What the lights mean”",
            confidence=0.62,
            latency_ms=5.0,
            sources=(SourceRef(kind="article", id="hub-lights", title="What the lights mean", score=0.8731),),
        )
    )
    raw = {
        "type": "feedback",
        "schema_version": 1,
        "feedback_id": "f-judged",
        "suggestion_id": "s-judged",
        "conversation_id": "judged",
        "verdict": "dismissed",
        "by": "lee",
        "at": "2026-11-30T10:01:00Z",
        "text": "wrong product",
    }
    await store.record(parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16))
    async with in_process_panel(store, page) as url:
        await page.goto(f"{url}/panel/conversations/judged")
        card = page.locator('.card[data-suggestion-id="s-judged"]')
        await expect(card.locator(".verdict")).to_have_text("Dismissed by lee: wrong product")
        await expect(card.locator(".confidence")).to_have_text("Confidence 62%")
        text = await card.inner_text()
        assert "87" not in text and "0.8" not in text, text  # the source's raw score is not shown
        await expect(card.locator(".sources li")).to_have_text("article: What the lights mean")


# ---- a queue row shows who is waiting and what they said last, and follows live messages ----
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_queue_row_shows_the_customers_name_and_last_message_and_follows_live_ones(
    page: Page, store: CaseStore
):
    await say_in(store, "plain", range(1))
    raw = message("named", "named-m1", "My <b>router</b> blinks amber " + "again and " * 20, author="Ada Lovelace")
    await store.record(parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16))
    feed = LiveFeed()
    async with in_process_panel(store, page, feed) as url:
        await page.goto(f"{url}/panel")
        named = page.locator('tr[data-conversation-id="named"]')
        await expect(named.locator(".name")).to_have_text("Ada Lovelace")
        preview = named.locator(".preview")
        await expect(preview).to_contain_text("Customer: My <b>router</b> blinks amber again")  # text, not markup
        assert ((await preview.text_content()) or "").strip().endswith("…")
        await expect(named.locator(".age")).to_contain_text("ago")
        plain = page.locator('tr[data-conversation-id="plain"]')
        await expect(plain.locator(".name")).to_have_text("plain")  # no name given: the conversation id
        await expect(plain.locator(".preview")).to_have_text("Customer: message 0")

        await expect(page.locator("body[data-live=on]")).to_have_count(1, timeout=SEEN)
        for update in await say_in(store, "plain", range(1, 3)):
            feed.publish(update)
        await expect(plain.locator(".preview")).to_have_text("Customer: message 2", timeout=SEEN)
        later = message("plain", "plain-m9", "It works now, thanks", author="Bo", sent_at=now())
        event = parse(json.dumps(later).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
        result = await store.record(event)
        assert result.case is not None
        feed.publish(recorded(event, result.case))
        await expect(plain.locator(".name")).to_have_text("Bo", timeout=SEEN)
        await expect(plain.locator(".preview")).to_have_text("Customer: It works now, thanks")
        await expect(plain.locator(".age")).to_have_text(re.compile(r"^\d+s ago$"))


# ---- times as each tenant reads them: its locale's clock, in its time zone ----
TENANT_DISPLAY = {
    "acme-uk": {"locale": "en-GB", "time_zone": "Europe/London"},
    "acme-us": {"locale": "en-US", "time_zone": "America/New_York"},
}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_uk_tenant_reads_24_hour_london_time_and_a_us_tenant_12_hour_new_york_time(
    browser: Browser, store: CaseStore
):
    for tenant in TENANT_DISPLAY:
        raw = message(f"{tenant}-1", f"{tenant}-m1", "Hello", tenant=tenant, sent_at="2026-07-01T13:05:00Z")
        await store.record(parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16))
    # The browser's own locale and zone are neither tenant's: 13:05 UTC would read 22:05 here.
    context = await browser.new_context(locale="de-DE", timezone_id="Asia/Tokyo")
    page = await context.new_page()
    panel = PanelSettings(auth="none", tenant_display=TENANT_DISPLAY)  # type: ignore[arg-type]
    try:
        async with in_process_panel(store, page, panel=panel) as url:
            await page.goto(f"{url}/panel/conversations/acme-uk-1")
            sent = page.locator(".msg time")
            await expect(sent).to_have_text("14:05")
            await expect(sent).to_have_attribute("title", re.compile(r"14:05 BST"))
            await page.goto(f"{url}/panel/conversations/acme-us-1")
            await expect(sent).to_have_text("9:05 AM")
            await expect(sent).to_have_attribute("title", re.compile(r"9:05 AM EDT"))
            await page.goto(f"{url}/panel")  # the queue: each row as its own tenant reads time
            uk = page.locator('tr[data-conversation-id="acme-uk-1"] .age time')
            await expect(uk).to_have_attribute("title", re.compile(r"14:05 BST"))
            us = page.locator('tr[data-conversation-id="acme-us-1"] .age time')
            await expect(us).to_have_attribute("title", re.compile(r"9:05 AM EDT"))
    finally:
        await context.close()


async def test_the_servers_12_or_24_hour_table_agrees_with_the_browsers_intl(page: Page):
    locales = ["en", "en-US", "en-GB", "en-IE", "en-CA", "fr-CA", "en-AU", "en-IN", "de-DE", "fr", "es-MX", "ja-JP"]
    locales += ["zh-CN", "zh-TW", "ko", "ar", "hi", "el", "pt-BR", "ru", "en-GB-u-hc-h12", "en-US-u-hc-h23"]
    cycles = await page.evaluate(
        "(ls) => ls.map((l) => new Intl.DateTimeFormat(l, { hour: 'numeric' }).resolvedOptions().hourCycle)", locales
    )
    browser_12 = {locale: cycle in ("h11", "h12") for locale, cycle in zip(locales, cycles, strict=True)}
    assert {locale: Display(locale, "UTC").hour12 for locale in locales} == browser_12


# ---- a lead reviews mined knowledge: approves one entry, retires another; an analyst has no review ----
FEE_QUESTION = "can I get the cancellation fee back if I cancel my subscription box?"
FEE_REFUNDED = "The cancellation fee is refundable within 14 days: I've refunded the fee to your card."
FEE_NOT_REFUNDED = "The cancellation fee is not refundable within 14 days, so I've refunded nothing."


async def sign_in_at(page: Page, url: str, who: str, path: str) -> None:
    """Sign in with ``who``'s token on the way to ``path``, as the panel's sign-in page asks."""
    await page.goto(url + path)
    await expect(page).to_have_url(f"{url}/login?next={path}")
    await page.get_by_label("Your access token").fill(TOKENS[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(url + path)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_lead_approves_one_mined_entry_and_retires_another_and_an_analyst_has_no_review(
    page: Page,
    browser: Browser,
    store: CaseStore,
    embedder,
    tmp_path: Path,  # type: ignore[no-untyped-def]
):
    # Three cases of acme resolved by analysts: two disagree on the fee, one settles a missing parcel. The real
    # miner, with review required, leaves both entries waiting for a lead.
    await record_events(store, parcel_case(0, tenant="acme"))
    fee_yes = [("customer", FEE_QUESTION), ("analyst", FEE_REFUNDED)]
    fee_no = [("customer", "will I get the cancellation fee back if I cancel the subscription box?"),
              ("analyst", FEE_NOT_REFUNDED)]  # fmt: skip
    await record_events(store, mining_case("fee-1", fee_yes, at=MINING_START + timedelta(days=1), tenant="acme"))
    await record_events(
        store, mining_case("fee-2", fee_no, at=MINING_START + timedelta(days=1, hours=1), tenant="acme")
    )
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)
    settings = MinerSettings(require_review=True, min_analyst_words=0)  # the fee's two short answers teach too
    miner = Miner(settings, engine=store.engine, knowledge=knowledge, clock=SystemClock())
    assert (await miner.run()).entries["pending_review"] == 2
    parcel_id, fee_id = entry_id("acme", "parcel-0"), entry_id("acme", "fee-1")

    async def status(entry: str) -> str:
        return str((await knowledge.governed(ids=[entry]))[0]["status"])

    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    panel = PanelSettings(auth="tokens", users=USERS)  # type: ignore[arg-type]
    try:
        async with in_process_panel(store, page, knowledge=knowledge, panel=panel) as url:
            await sign_in_at(page, url, "lee", "/panel/review")
            await expect(page.get_by_role("link", name="Review", exact=True)).to_have_attribute("aria-current", "page")
            entries = page.locator("li.review")
            await expect(entries).to_have_count(2)
            parcel = page.locator(f'li.review[data-entry-id="{parcel_id}"]')
            fee = page.locator(f'li.review[data-entry-id="{fee_id}"]')

            # The conflict: the resolution it states beside the one that disagrees, on one row.
            await expect(fee.locator(".conflict-note")).to_contain_text(
                "1 of its cases resolved this problem otherwise"
            )
            kept, other = fee.locator(".side-by-side .kept"), fee.locator(".side-by-side .conflicting")
            await expect(kept.or_(other)).to_have_count(2)
            said = {await kept.inner_text(), await other.inner_text()}
            assert sum("not refundable" in text for text in said) == 1, said
            left, right = await kept.bounding_box(), await other.bounding_box()
            assert left and right and abs(left["y"] - right["y"]) < 2 and left["x"] + left["width"] <= right["x"]

            # Its provenance: each case a link to its conversation, with the customer's problem and the steps (folded
            # when all its cases are shown above already).
            await expect(fee.locator("details.cases")).not_to_have_attribute("open", "")
            await parcel.get_by_text("Learnt from 1 case").click()
            case_link = parcel.locator("details.cases a", has_text="parcel-0")
            await expect(case_link).to_be_visible()
            await expect(case_link).to_have_attribute("href", "/panel/conversations/parcel-0")
            await expect(parcel.locator("details.cases .problem")).to_contain_text("never arrived")
            [taught] = (await knowledge.governed(ids=[parcel_id]))[0]["provenance"]["cases"]
            await expect(parcel.locator("details.cases .steps li")).to_have_text(taught["steps"])
            await case_link.click()
            await expect(page.get_by_role("heading", level=1)).to_contain_text("parcel-0")
            await page.go_back()
            await expect(entries).to_have_count(2)

            # Approve the parcel entry: served now; the page says so, and offers to retire it instead.
            await parcel.get_by_role("button", name="Approve").click()
            await expect(parcel.get_by_role("status")).to_have_text("Approved: analysts are shown it now.")
            await expect(parcel.locator('[data-fact="status"]')).to_have_text("Served to analysts")
            await expect(parcel.get_by_role("button", name="Approve")).to_be_hidden()
            await expect(parcel.get_by_role("button", name="Retire")).to_be_visible()
            assert await status(parcel_id) == "active"
            hits = await knowledge.search("the app says my parcel was delivered but I don't have it", 3, tenant="acme")
            assert hits and hits[0].entry_id == parcel_id

            # Retire the conflicting one: not served, kept.
            await fee.get_by_role("button", name="Retire").click()
            await expect(fee.get_by_role("status")).to_have_text("Retired: analysts are no longer shown it.")
            await expect(fee.locator('[data-fact="status"]')).to_have_text("Retired (not served)")
            assert await status(fee_id) == "retired"

            # Reloaded, nothing waits; each is under its new status.
            await page.reload()
            await expect(page.locator(".empty")).to_have_text("Nothing waits for review.")
            await page.get_by_role("link", name="Retired").click()
            await expect(entries).to_have_count(1)
            await expect(page.locator(f'li.review[data-entry-id="{fee_id}"]')).to_be_visible()
            await page.get_by_role("link", name="Served").click()
            await expect(page.locator(f'li.review[data-entry-id="{parcel_id}"]')).to_be_visible()

            # An analyst has no review: not in the navigation, and refused at its address.
            analyst = await browser.new_context(viewport={"width": 1366, "height": 860})
            try:
                tab = await analyst.new_page()
                await sign_in_at(tab, url, "ana", f"/panel/knowledge/{parcel_id}")
                await expect(tab.get_by_role("link", name="Review", exact=True)).to_have_count(0)
                await expect(tab.get_by_role("link", name="open the case it came from")).to_have_attribute(
                    "href", "/panel/conversations/parcel-0"
                )
                refused = await tab.goto(url + "/panel/review")
                assert refused is not None and refused.status == 403
                answer = await tab.request.post(f"{url}/api/knowledge/{fee_id}/approve")
                assert answer.status == 403
                assert await status(fee_id) == "retired"
            finally:
                await analyst.close()
    finally:
        await knowledge.close()
    assert problems == []  # no script error and no CSP refusal
