"""A case's progress in the panel: its state in words, what it is in breach of, SLA clocks counting down, promises
with their due times, the next step and the handover brief on the conversation page; the queue by breaches, then what
falls due first. Read for people (``progress_of``), drawn by the server, and in headless Chromium on the real
pipeline (vigil.testing.wired)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect
from prometheus_client import CollectorRegistry

from tests.browser import chromium
from tests.panel.test_routes import served
from tests.progress.test_next_step import resolved_cases
from tests.progress.test_skill import T0, change, say, settings
from vigil.cases.views import CommitmentView, ConversationView, ProgressView, StateView, TimerView
from vigil.core.clock import ManualClock
from vigil.core.metrics import Metrics
from vigil.panel.display import Display
from vigil.panel.progress import STATE_WORDS, duration, progress_of
from vigil.panel.settings import PanelSettings
from vigil.progress.library import MINE
from vigil.testing import Wired, panel_app, wired
from vigil.transport.memory import MemoryOutbox
from vigil.wire.events import Event

LONDON = Display(locale="en-GB", time_zone="Europe/London")
NOON = datetime(2026, 7, 1, 11, 0, tzinfo=UTC)  # 12:00 in London (BST)
SEEN = 15_000  # ms


def a_view(**fields: Any) -> ConversationView:
    base: dict[str, Any] = {
        "conversation_id": "c-1",
        "tenant": "acme",
        "status": "open",
        "assignee": None,
        "priority": None,
        "opened_at": NOON - timedelta(hours=1),
        "updated_at": NOON,
        "message_count": 2,
        "state": StateView(status="waiting_on_customer", since=NOON - timedelta(minutes=18)),
        "closed_at": None,
        "waiting_since": None,
        "messages": [],
        "suggestions": [],
        "feedback": [],
        "commitments": [],
        "actions": [],
        "progress": None,
        "older": None,
    }
    return ConversationView(**{**base, **fields})


def shown(t: datetime, now: datetime) -> str:
    """A time as the panel shows it in UTC (vigil.panel.progress.moment): the time of day today, else with its day
    and month (a run near midnight puts a due time on the next day)."""
    if t.date() == now.date():
        return t.strftime("%H:%M")
    year = f" {t.year}" if t.year != now.year else ""
    return f"{t.day} {t:%b}{year} {t:%H:%M}"


def timer(kind: str, due_in_s: float, warn_before_s: float | None = None, ref: str | None = None) -> TimerView:
    due = NOON + timedelta(seconds=due_in_s)
    warn = due - timedelta(seconds=warn_before_s) if warn_before_s is not None else None
    return TimerView(timer_id=f"t-{kind}", kind=kind, ref=ref, due_at=due, warn_at=warn, stage="warn")


def promise(n: int, status: str, due_in_s: float | None, settled: bool = False) -> CommitmentView:
    due = NOON + timedelta(seconds=due_in_s) if due_in_s is not None else None
    return CommitmentView(
        commitment_id=f"k-{n}",
        message_id=f"m-{n}",
        what=f"promise {n}",
        due_at=due,
        status=status,
        settled_at=NOON - timedelta(minutes=5) if settled else None,
    )


# ---- read for people ----
def test_the_state_is_said_in_words_with_since_when_in_the_tenants_time():
    shown = progress_of(a_view(), None, LONDON, NOON)
    assert shown.state == "Waiting on the customer since 11:42"
    yesterday = a_view(state=StateView(status="waiting_on_internal", since=NOON - timedelta(days=1)))
    assert progress_of(yesterday, None, LONDON, NOON).state == "Waiting on another team since 30 Jun 12:00"
    assert set(STATE_WORDS) == {"new", "waiting_on_analyst", "waiting_on_customer", "waiting_on_internal"} | {
        "resolved",
        "closed",
    }


def test_a_clock_is_ok_then_in_its_warning_window_then_overdue():
    def phase(due_in_s: float) -> tuple[str, str]:
        state = StateView(status="new", since=NOON, timers=[timer("first_response", due_in_s, warn_before_s=120)])
        (clock,) = progress_of(a_view(state=state), None, LONDON, NOON).clocks
        return clock.countdown.phase, clock.countdown.left

    assert phase(600) == ("ok", "10m 00s left")
    assert phase(65) == ("warn", "1m 05s left")
    assert phase(0) == ("overdue", "overdue by 0s")
    assert phase(-3 * 3600 - 120) == ("overdue", "overdue by 3h 02m")


def test_open_promises_come_first_soonest_due_and_settled_ones_after_them_as_made():
    commitments = [
        promise(1, "kept", 600, settled=True),
        promise(2, "open", 7200),
        promise(3, "open", None),
        promise(4, "open", 1800),
        promise(5, "missed", -60, settled=True),
    ]
    state = StateView(status="waiting_on_customer", since=NOON, timers=[timer("commitment", 1800, 1800, ref="k-4")])
    shown = progress_of(a_view(state=state, commitments=commitments), None, LONDON, NOON)
    assert [(p.what, p.status) for p in shown.promises] == [
        ("promise 4", "open"),
        ("promise 2", "open"),
        ("promise 3", "open"),
        ("promise 1", "kept"),
        ("promise 5", "missed"),
    ]
    first = shown.promises[0]
    assert (
        first.due == "12:30" and first.countdown is not None and first.countdown.phase == "warn"
    )  # reminded from now on
    assert shown.promises[2].countdown is None and shown.promises[2].due is None  # no time given
    assert shown.promises[3].countdown is None and shown.promises[3].settled == "11:55"
    assert shown.clocks == []  # a promise's timer is shown with the promise, not as an SLA clock


def test_the_next_step_is_named_for_people():
    read = ProgressView(
        procedure="address_change",
        step="verify_identity",
        next_step="ask_new_address",
        next_reply="What is the new address?",
        sentiment=None,
        chases=0,
    )
    step = progress_of(a_view(progress=read), None, LONDON, NOON).step
    assert step is not None and (step.procedure, step.label, step.reply) == (
        "Address change",
        "Ask new address",
        "What is the new address?",
    )


def test_a_countdown_is_written_as_the_browser_writes_it():
    assert [duration(s) for s in (0, 59.9, 60, 3599, 3600, 48 * 3600 - 1, 49 * 3600)] == [
        "0s",
        "59s",
        "1m 00s",
        "59m 59s",
        "1h 00m",
        "47h 59m",
        "2d 1h",
    ]


# ---- on the real pipeline ----
SLA = {
    "*": {
        "*": {"first_response_s": 600, "next_response_s": 1200, "resolution_s": 86400},
        "low": {"first_response_s": 7200, "next_response_s": 7200, "resolution_s": 86400},
    }
}
NEXT_REPLY = "Thanks, you're verified. What is the new address?"
HOSTILE = "<img src=x onerror=alert(1)>"


@dataclass
class Progressing:
    """A pipeline whose clock stands at ``now`` (the real time when it was built), with two open cases: ``soon``,
    whose next response falls due ``DUE_IN_S`` after ``now``, with a promise open and a next step; and ``later``,
    whose customer has waited longer but whose first response (low priority) falls due only in 85 minutes."""

    vigil: Wired
    now: datetime

    def minutes(self, seconds_from_now: float) -> float:
        return (self.now + timedelta(seconds=seconds_from_now) - T0).total_seconds() / 60

    async def send(self, seconds_from_now: float, event: Event) -> None:
        """``event``, sent when the clock stands at its time (the case store takes no time far ahead of it)."""
        await self.vigil.advance(self.now + timedelta(seconds=seconds_from_now))
        await self.vigil.send(event)


DUE_IN_S = 10


@pytest.fixture
async def progressing(tmp_path: Path) -> AsyncIterator[Progressing]:
    async with wired(
        tmp_path, settings=settings(tmp_path, sla=SLA, procedures_min_cases=5), clock=ManualClock(T0)
    ) as vigil:
        await resolved_cases(vigil, 6)
        await next(job for job in vigil.parts.jobs if job.name == MINE).run(T0 + timedelta(minutes=30))
        p = Progressing(vigil, datetime.now(UTC).replace(microsecond=0))
        await p.send(-1900, change(0, "opened", p.minutes(-1900), "later", priority="low"))
        await p.send(-1900, say(1, "customer", f"My parcel never came {HOSTILE}", p.minutes(-1900), "later"))
        await p.send(-1800, change(0, "opened", p.minutes(-1800), "soon", category="address_change", assignee="sam"))
        moved = "Hi, I have moved and need to change my delivery address"
        await p.send(-1790, say(1, "customer", moved, p.minutes(-1790), "soon"))
        verify = "Can you confirm your date of birth and postcode? I'll get back to you within 2 hours."
        await p.send(-1780, say(2, "analyst", verify, p.minutes(-1780), "soon", metadata={"step": "verify_identity"}))
        await p.send(-1300, change(3, "assigned", p.minutes(-1300), "soon", assignee="ria"))  # a handover
        verified = "12 May 1980, and the old postcode is SW1A 1AA"
        await p.send(DUE_IN_S - 1200, say(4, "customer", verified, p.minutes(DUE_IN_S - 1200), "soon"))
        await vigil.advance(p.now)
        yield p


def section(page: str) -> str:
    found = re.search(r'<section class="progress" id="progress".*?</section>', page, re.S)
    assert found, page[:600]
    return found.group(0)


async def test_the_conversation_page_draws_the_cases_progress(progressing: Progressing):
    vigil, now = progressing.vigil, progressing.now
    app = panel_app(
        views=vigil.views,
        metrics=Metrics(CollectorRegistry()),
        clock=vigil.clock,
        panel=PanelSettings(auth="none"),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        page = await client.get("/panel/conversations/soon")
        alone = await client.get("/panel/progress/soon")
        queue = await client.get("/api/queue")
        hostile = await client.get("/panel/conversations/later")
        script = (await client.get("/panel/static/panel.js")).text
    assert page.status_code == 200 and alone.status_code == 200
    drawn = section(page.text)
    assert section(alone.text) == drawn and "<html" not in alone.text  # the section alone, to draw again
    since = shown(now + timedelta(seconds=-1780), now)  # its promise ("within 2 hours") put it on the analyst
    assert f'<p class="state" data-fact="state">Waiting on the analyst since {since}</p>' in drawn
    clock = re.search(r'<li data-clock="next_response">.*?</li>', drawn, re.S)
    assert clock and f'data-due="{(now + timedelta(seconds=DUE_IN_S)).isoformat()}"' in clock.group(0)
    assert f'data-phase="warn">{DUE_IN_S}s left<' in clock.group(0)  # warned of two minutes before
    assert re.search(r'<li data-clock="resolution">.*data-phase="ok">23h 30m left<', drawn)
    assert 'data-clock="first_response"' not in drawn  # answered: that clock stopped
    kept = re.search(r'<li data-commitment-id="[^"]+" data-status="open">(.*?)</li>', drawn, re.S)
    due = shown(now + timedelta(seconds=-1780 + 7200), now)
    assert kept and "get back to you" in kept.group(1) and f">{due}</time>" in kept.group(1)
    assert '<strong class="label">Ask new address</strong> <span class="procedure">(Address change)</span>' in drawn
    assert '<p class="reply-text">Thanks, you&#39;re verified. What is the new address?</p>' in drawn
    brief = re.search(r'<pre class="brief-text">(.*?)</pre>', drawn, re.S)
    assert brief and brief.group(1).startswith("Handover: case soon (waiting on analyst)\nProblem: Hi, I have moved")
    # The queue arrives by what falls due first, not by who has waited longest; it says the state as the page does.
    assert [item["conversation_id"] for item in queue.json()] == ["soon", "later"]
    assert all(f'"{words}"' in script for words in STATE_WORDS.values())
    # The customer's words in the brief are text, never markup.
    brief_of_later = section(hostile.text)
    assert "Problem: My parcel never came &lt;img src=x" in brief_of_later and "<img" not in brief_of_later


async def test_in_the_browser_clocks_count_down_the_brief_opens_and_the_queue_puts_breaches_then_what_falls_due_first(
    progressing: Progressing,
):
    vigil = progressing.vigil
    app = panel_app(
        views=vigil.views,
        metrics=Metrics(CollectorRegistry()),
        clock=vigil.clock,
        feed=vigil.feed,
        outboxes=[MemoryOutbox()],  # where the analysts' verdicts go
        panel=PanelSettings(auth="none"),
    )
    async with served(app) as url, chromium() as browser:
        page = await browser.new_page(viewport={"width": 1366, "height": 860})
        await conversation_progress(page, url, progressing)
        await queue_order(page, url, progressing)
        await page.goto("about:blank")  # a live stream would hold the server open


async def conversation_progress(page: Page, url: str, p: Progressing) -> None:
    await page.goto(f"{url}/panel/conversations/soon")
    progress = page.locator("#progress")
    clock = progress.locator('[data-clock="next_response"] .countdown')
    await expect(clock).to_have_text(re.compile(r"^\d+s left$"))
    await expect(clock).to_have_attribute("data-phase", "warn")
    first = await clock.text_content()
    await expect(clock).not_to_have_text(first or "", timeout=3000)  # it ticks
    await expect(clock).to_have_text(re.compile(r"^overdue by \d+s$"), timeout=(DUE_IN_S + 10) * 1000)
    await expect(clock).to_have_attribute("data-phase", "overdue")

    promised = progress.locator('.promises li[data-status="open"]')
    await expect(promised).to_contain_text("get back to you")
    due = shown(p.now + timedelta(seconds=-1780 + 7200), p.now)
    await expect(promised.locator("time")).to_have_text(due)
    await expect(promised.locator(".countdown")).to_have_text(re.compile(r"^1h \d\dm left$"))

    step = progress.locator(".next-step")
    await expect(step.locator(".label")).to_have_text("Ask new address")
    await step.get_by_role("button", name="Use this reply").click()
    await expect(page.locator("#reply")).to_have_value(NEXT_REPLY)

    brief = progress.locator(".brief-text")
    await expect(brief).to_be_hidden()
    await progress.get_by_text("Handover brief").click()
    await expect(brief).to_be_visible()
    lines = (await brief.inner_text()).splitlines()
    assert lines[0] == "Handover: case soon (waiting on analyst)" and "Next step: ask_new_address" in " ".join(lines)

    # The suggestions of progress read well: a next step names its step, a brief keeps its lines.
    card = page.locator('.card[data-kind="next_step"]').first
    await expect(card.locator(".step")).to_have_text("Step: Ask new address (Address change)")
    handover = page.locator('.card[data-kind="handover"] .text')
    assert len((await handover.inner_text()).splitlines()) >= 5
    # A notice to the analyst is noted or dismissed: nothing to copy into the reply, no confidence to weigh.
    notice = page.locator('.card[data-kind="handover"]').first
    await expect(notice.get_by_role("button", name="Accept")).to_have_count(0)
    await expect(notice.locator(".confidence")).to_have_count(0)
    await notice.get_by_role("button", name="Noted").click()
    await expect(notice.locator(".verdict")).to_have_text(re.compile(r"^Noted"))
    await expect(page.locator("#reply")).to_have_value(NEXT_REPLY)  # what the step put there, not the brief

    # The analyst answers: the section is drawn again, live, without the stopped clock, the brief left open. The
    # promise to get back within 2 hours is still open, so the case stays the analyst's, since this message.
    await p.send(DUE_IN_S + 5, say(5, "analyst", NEXT_REPLY, p.minutes(DUE_IN_S + 5), "soon"))
    answered = shown(p.now + timedelta(seconds=DUE_IN_S + 5), p.now)
    await expect(progress.locator(".state")).to_have_text(f"Waiting on the analyst since {answered}", timeout=SEEN)
    await expect(clock).to_have_count(0)
    await expect(brief).to_be_visible()
    await expect(brief).to_contain_text("Handover: case soon (waiting on analyst)")


async def queue_order(page: Page, url: str, p: Progressing) -> None:
    await page.goto(f"{url}/panel")
    rows = page.locator("#queue tbody tr")
    await expect(rows).to_have_count(2)
    # Its promise falls due after the other case's first response (low priority: two hours).
    assert [await r.get_attribute("data-conversation-id") for r in await rows.all()] == ["later", "soon"]
    soon = page.locator('tr[data-conversation-id="soon"]')
    later = page.locator('tr[data-conversation-id="later"]')
    await expect(soon.locator(".state")).to_have_text("Waiting on the analyst")  # its promise is open
    await expect(soon.locator(".due .countdown")).to_have_text(re.compile(r"^1h 3\dm left$"))
    await expect(later.locator(".state")).to_have_text("New, not answered yet")
    await expect(later.locator(".due .countdown")).to_have_text(re.compile(r"^1h 2\dm left$"))
    await expect(page.locator("body[data-live=on]")).to_have_count(1, timeout=SEEN)
    # The customer writes: a next response falls due in 20 minutes, and the queue, live, puts that case first,
    # although the other customer has waited longer.
    await p.send(DUE_IN_S + 20, say(6, "customer", "4 Elm Road, Leeds LS1 4AP", p.minutes(DUE_IN_S + 20), "soon"))
    first = page.locator("#queue tbody tr:first-child")
    await expect(first).to_have_attribute("data-conversation-id", "soon", timeout=SEEN)
    await expect(soon.locator(".state")).to_have_text("Waiting on the analyst")
    await expect(soon.locator(".due .countdown")).to_have_text(re.compile(r"^(19|20)m \d\ds left$"))
    # No analyst answers in time: the breach arrives live (the timer's notice), and the row names the clock passed.
    await p.vigil.advance(p.now + timedelta(seconds=DUE_IN_S + 20 + 1200 + 1))
    await expect(soon.locator(".due .badge.breach")).to_have_text("Next response breached", timeout=SEEN)
    await expect(soon).to_have_class(re.compile(r"\bbreached\b"))
    await expect(first).to_have_attribute("data-conversation-id", "soon")
    await expect(later.locator(".due .badge.breach")).to_have_count(0)
    # The case page puts it at the top of its progress, with when it was due.
    await page.goto(f"{url}/panel/conversations/soon")
    breach = page.locator('#progress .breaches li[data-breach="next_response"]')
    await expect(breach).to_contain_text("Breached Next response was due")
    await expect(breach.locator("time")).to_have_text(shown(p.now + timedelta(seconds=DUE_IN_S + 20 + 1200), p.now))
