"""The knowledge review over HTTP, in process, on both databases: what a lead is shown of mined knowledge (pending
entries newest first, their cases, conflicting resolutions side by side), the approve and retire API (roles,
tenants, CSRF), and a mined entry's knowledge page.

(The same review in a real browser: tests/e2e/test_panel_browser.py.)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mining.test_miner import START, conversation, record
from tests.panel.test_routes import bearer, panel_app, sign_in
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock, SystemClock
from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.store import Governance, KnowledgeStore
from vigil.mining.miner import Miner
from vigil.mining.settings import MinerSettings
from vigil.transport.memory import MemoryOutbox

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
FEE_PROBLEM = "can I get the cancellation fee back if I cancel my subscription box?"
FEE_KEPT = "The cancellation fee is refundable within 14 days: I've refunded the fee to your card."
FEE_OTHER = "The cancellation fee is not refundable within 14 days, so I've refunded nothing."


def case(cid: str, problem: str, steps: Sequence[str], csat: int | None = 5) -> dict[str, Any]:
    """A case as the miner records it in an entry's provenance."""
    return {
        "conversation_id": cid,
        "closed_at": (T0 - timedelta(days=1)).isoformat(),
        "problem": problem,
        "steps": list(steps),
        "outcome": None,
        "csat": csat,
        "message_ids": [f"{cid}-m1", f"{cid}-m2"],
        "context": [],
    }


def mined(
    entry_id: str,
    tenant: str | None,
    cases: Sequence[dict[str, Any]],
    *,
    conflicts: Sequence[str] = (),
    conflicts_with: Sequence[str] = (),
) -> tuple[Entry, dict[str, Any]]:
    """A mined ``case`` entry stating its first case's resolution, and its provenance in the miner's shape."""
    kept = cases[0]
    entry = Entry(
        id=entry_id,
        kind="case",
        title=kept["problem"],
        body=f"**Problem.** {kept['problem']}\n\n**Resolution.**\n" + "\n".join(f"- {s}" for s in kept["steps"]),
        origin="miner",
        url=f"/panel/conversations/{kept['conversation_id']}",
        passages=(Passage(id=f"{entry_id}#1", heading=None, text=f"{kept['problem']}\n{' '.join(kept['steps'])}"),),
        tenant=tenant,
    )
    provenance = {
        "source": "miner",
        "support": len(cases),
        "kept": kept["conversation_id"],
        "conflicts": list(conflicts),
        "conflicts_with": list(conflicts_with),
        "feedback": {"accepted": 0, "dismissed": 0},
        "cases": list(cases),
    }
    return entry, provenance


class Shelf:
    """The test's knowledge store, on a clock it moves: each entry written a minute after the one before."""

    def __init__(self, knowledge: KnowledgeStore, clock: ManualClock) -> None:
        self.knowledge = knowledge
        self.clock = clock

    async def put(
        self,
        entry: Entry,
        provenance: dict[str, Any] | None = None,
        status: str = "pending_review",
        expires: datetime | None = None,
    ) -> None:
        self.clock.advance(60)
        said = Governance(status=status, confidence=0.6, provenance=provenance or {}, expires_at=expires)  # type: ignore[arg-type]
        await self.knowledge.upsert([entry], governance={entry.id: said} if provenance else {})

    async def status(self, entry_id: str) -> str:
        [row] = await self.knowledge.governed(ids=[entry_id])
        return str(row["status"])


@pytest.fixture
async def shelf(store: CaseStore, tmp_path: Path, embedder) -> AsyncIterator[Shelf]:  # type: ignore[no-untyped-def]
    clock = ManualClock(T0)
    knowledge = KnowledgeStore(engine=store.engine, embedder=embedder, clock=clock, chroma_path=tmp_path / "chroma")
    await knowledge.open()
    try:
        yield Shelf(knowledge, clock)
    finally:
        await knowledge.close()


@pytest.fixture
async def stocked(shelf: Shelf) -> Shelf:
    """globex (lee's tenant): a conflicting entry, then a plain one, then a served one; acme: one pending; every
    tenant: an imported article."""
    fee, fee_said = mined(
        "case-fee",
        "globex",
        [case("g-1", FEE_PROBLEM, [FEE_KEPT]), case("g-2", "will I get the fee back if I cancel?", [FEE_OTHER], 2)],
        conflicts=["g-2"],
    )
    await shelf.put(fee, fee_said)
    parcel, parcel_said = mined(
        "case-parcel",
        "globex",
        [case("g-3", "my parcel says delivered but never arrived", ["I've opened a missing-parcel claim."])],
    )
    await shelf.put(parcel, parcel_said)
    served, served_said = mined("case-served", "globex", [case("g-4", "how do I change my address?", ["Settings."])])
    await shelf.put(served, served_said, status="active")
    router, router_said = mined("case-router", "acme", [case("a-1", "my router blinks red", ["Restart it."])])
    await shelf.put(router, router_said)
    article = Entry(
        id="hub-lights",
        kind="article",
        title="What the lights on your Hub mean",
        body="A solid amber light means no fibre signal.",
        origin="knowledge/articles/hub-lights.md",
        passages=(Passage(id="hub-lights#1", heading=None, text="A solid amber light means no fibre signal."),),
    )
    await shelf.put(article)
    return shelf


@pytest.fixture
async def client(store: CaseStore, stocked: Shelf, registry) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    app = panel_app(store, MemoryOutbox(), registry, knowledge=stocked.knowledge)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as c:
        yield c


class Page(HTMLParser):
    """A page's elements, each with its attributes and all the text inside it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.open: list[int] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}, []))  # present: at least ""
        if tag not in ("br", "hr", "img", "input", "meta", "link"):
            self.open.append(len(self.elements) - 1)

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.elements[self.open.pop()][0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for i in self.open:
            self.elements[i][2].append(data)

    def text(self, tag: str, **attrs: str) -> list[str]:
        """The whitespace-normalised text of every ``tag`` whose attributes include ``attrs`` (a class among
        several counts)."""
        return [" ".join("".join(text).split()) for t, a, text in self.elements if t == tag and _has(a, attrs)]

    def attr(self, tag: str, name: str, **attrs: str) -> list[str | None]:
        return [a.get(name) for t, a, _ in self.elements if t == tag and _has(a, attrs)]


def _has(found: dict[str, str | None], wanted: dict[str, str]) -> bool:
    for keyword, value in wanted.items():
        name = keyword.rstrip("_").replace("_", "-")  # class_ -> class, data_fact -> data-fact
        have = found.get(name) or ""
        if value not in (have.split() if name == "class" else [have]):
            return False
    return True


def entry_box(html: str, entry_id: str) -> str:
    """The part of the review page about one entry."""
    found = re.search(rf'<li class="review" data-entry-id="{re.escape(entry_id)}".*?\n  </li>', html, re.S)
    assert found, entry_id
    return found.group(0)


async def test_a_lead_sees_the_entries_of_their_tenants_waiting_for_review_newest_first(client: httpx.AsyncClient):
    answer = await client.get("/panel/review", headers=bearer("lee"))
    assert answer.status_code == 200
    page = Page(answer.text)
    # lee leads globex: the acme entry is not there, nor the served one, nor the help centre's article.
    assert page.attr("li", "data-entry-id", class_="review") == ["case-parcel", "case-fee"]
    parcel = Page(entry_box(answer.text, "case-parcel"))
    assert parcel.text("h2") == ["my parcel says delivered but never arrived"]
    assert parcel.text("dd", data_fact="status") == ["Waiting for review (not served)"]
    assert parcel.text("dd", data_fact="confidence") == ["60%"]
    assert parcel.text("dd", data_fact="support") == ["1 case"]
    assert "Solved case · tenant globex" in parcel.text("p", class_="kind")[0]
    # The resolution it states, and its case: a link to the conversation, the customer's problem, the steps.
    assert parcel.text("section", class_="kept")[0].endswith("I've opened a missing-parcel claim.")
    assert parcel.attr("a", "href") == [
        "/panel/knowledge/case-parcel",  # its title
        "/panel/conversations/g-3",  # the case whose resolution it states
        "/panel/conversations/g-3",  # the same case, in the list of those it was learnt from
    ]
    assert parcel.text("p", class_="problem") == ["Customer: my parcel says delivered but never arrived"] * 2
    assert parcel.text("button") == ["Approve", "Retire"] and parcel.attr("button", "hidden") == [None, None]


async def test_a_conflict_shows_the_stated_resolution_beside_each_conflicting_one(client: httpx.AsyncClient):
    answer = await client.get("/panel/review", headers=bearer("lee"))
    fee = Page(entry_box(answer.text, "case-fee"))
    assert fee.text("p", class_="conflict-note") == [
        "1 of its cases resolved this problem otherwise: compare before serving it."
    ]
    [side_by_side] = fee.text("div", class_="side-by-side")
    kept, other = fee.text("section", class_="kept"), fee.text("section", class_="conflicting")
    assert kept == [f"The resolution it states Conversation g-1 · closed 2026-11-01 09:00 UTC · CSAT 5/5 "
                    f"Customer: {FEE_PROBLEM} {FEE_KEPT}"]  # fmt: skip
    assert other == ["Conflicting resolution Conversation g-2 · closed 2026-11-01 09:00 UTC · CSAT 2/5 "
                     f"Customer: will I get the fee back if I cancel? {FEE_OTHER}"]  # fmt: skip
    assert side_by_side.index(FEE_KEPT) < side_by_side.index(FEE_OTHER)
    # Both cases are in its provenance, the conflicting one marked.
    assert fee.attr("li", "data-conversation-id", class_="case") == ["g-1", "g-2"]
    assert fee.text("span", class_="tag") == ["stated", "conflicts"]


async def test_an_entry_whose_cases_disagree_is_headed_by_the_problem_of_the_case_it_states(
    shelf: Shelf, client: httpx.AsyncClient
):
    other = "will I get the fee back if I cancel?"
    fee, said = mined(
        "case-mixed",
        "globex",
        [case("g-1", FEE_PROBLEM, [FEE_KEPT]), case("g-2", other, [FEE_OTHER], 2)],
        conflicts=["g-2"],
    )
    await shelf.put(dataclasses.replace(fee, title=other), said)  # the miner's title: the other case's wording
    answer = await client.get("/panel/review", headers=bearer("lee"))
    box = Page(entry_box(answer.text, "case-mixed"))
    assert box.text("h2") == [FEE_PROBLEM]
    assert box.text("section", class_="kept")[0].endswith(f"Customer: {FEE_PROBLEM} {FEE_KEPT}")


async def test_entries_for_one_problem_that_disagree_are_shown_beside_each_other(
    store: CaseStore, shelf: Shelf, registry
):  # type: ignore[no-untyped-def]
    yes, yes_said = mined(
        "case-yes", "globex", [case("g-1", FEE_PROBLEM, [FEE_KEPT])], conflicts_with=["case-no", "case-acme"]
    )
    no, no_said = mined(
        "case-no",
        "globex",
        [case("g-2", "is the cancellation fee refundable?", [FEE_OTHER])],
        conflicts_with=["case-yes"],
    )
    acme, acme_said = mined("case-acme", "acme", [case("a-1", "fee back?", ["Acme's own answer."])])
    for entry, said in ((yes, yes_said), (no, no_said), (acme, acme_said)):
        await shelf.put(entry, said)
    app = panel_app(store, MemoryOutbox(), registry, knowledge=shelf.knowledge)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
        html = (await client.get("/panel/review", headers=bearer("lee"))).text
        entry_page = Page((await client.get("/panel/knowledge/case-yes", headers=bearer("lee"))).text)
    box = Page(entry_box(html, "case-yes"))
    assert box.text("p", class_="conflict-note") == [
        "1 other entry for the same problem says otherwise: compare before serving it."
    ]
    # Beside the resolution it states: the other entry's, linked, with its status and its case; never another
    # tenant's (named in its provenance, but not lee's to see).
    [rival] = box.text("section", class_="rival")
    assert rival.startswith("Another entry says: is the cancellation fee refundable? Waiting for review")
    assert rival.endswith(FEE_OTHER) and "Acme" not in html
    assert box.attr("section", "data-entry-id", class_="rival") == ["case-no"]
    assert "/panel/knowledge/case-no" in box.attr("a", "href")
    assert Page(entry_box(html, "case-no")).attr("section", "data-entry-id", class_="rival") == ["case-yes"]
    [beside] = entry_page.text("section", class_="rival")
    assert beside.endswith(FEE_OTHER)


async def test_the_review_lists_served_and_retired_mined_entries_too(client: httpx.AsyncClient, stocked: Shelf):
    served = Page((await client.get("/panel/review?status=active", headers=bearer("lee"))).text)
    assert served.attr("li", "data-entry-id", class_="review") == ["case-served"]  # mined only: not the article
    # Served already: Retire is offered, Approve hidden (the script shows it once the entry is retired).
    assert served.attr("button", "hidden", data_action="retire") == [None]
    assert served.attr("button", "hidden", data_action="approve") == [""]
    retired = Page((await client.get("/panel/review?status=retired", headers=bearer("lee"))).text)
    assert retired.attr("li", "data-entry-id", class_="review") == []
    assert retired.text("p", class_="empty") == ["No mined entry has been retired."]
    assert (await client.get("/panel/review?status=draft", headers=bearer("lee"))).status_code == 404
    # An admin of every tenant sees every tenant's.
    everything = Page((await client.get("/panel/review", headers=bearer("root"))).text)
    assert everything.attr("li", "data-entry-id", class_="review") == ["case-router", "case-parcel", "case-fee"]


async def test_an_expired_entry_says_it_is_not_served(store: CaseStore, shelf: Shelf, registry):  # type: ignore[no-untyped-def]
    old, old_said = mined("case-old", "globex", [case("g-9", "where is the tracking page?", ["Under My parcels."])])
    await shelf.put(old, old_said, status="active", expires=shelf.clock.now() + timedelta(minutes=2))
    app = panel_app(store, MemoryOutbox(), registry, knowledge=shelf.knowledge, clock=shelf.clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
        before = Page((await client.get("/panel/review?status=active", headers=bearer("lee"))).text)
        shelf.clock.advance(3600)
        after = Page((await client.get("/panel/review?status=active", headers=bearer("lee"))).text)
    assert before.text("dd", data_fact="status") == ["Served to analysts"]
    assert before.text("dd", data_fact="expires") == ["2026-11-02 09:02 UTC"]
    assert before.attr("li", "data-expired", class_="review") == [None]
    assert after.text("dd", data_fact="status") == ["Expired (not served)"]
    assert after.attr("li", "data-expired", class_="review") == [""]


async def test_an_entry_an_faq_took_over_says_so_and_links_to_the_faq(store: CaseStore, shelf: Shelf, registry):  # type: ignore[no-untyped-def]
    part, said = mined("case-part", "globex", [case("g-7", "where is the tracking page?", ["Under My parcels."])])
    await shelf.put(part, {**said, "superseded_by": "case-faq"}, status="retired")
    app = panel_app(store, MemoryOutbox(), registry, knowledge=shelf.knowledge, clock=shelf.clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
        review = Page((await client.get("/panel/review?status=retired", headers=bearer("lee"))).text)
        page = Page((await client.get("/panel/knowledge/case-part", headers=bearer("lee"))).text)
    for shown in (review, page):
        assert shown.text("dd", data_fact="status") == ["Part of an FAQ (served as the FAQ)"]
        assert shown.text("dd", data_fact="superseded-by") == ["the FAQ that serves it"]
        assert "/panel/knowledge/case-faq" in [a for a in shown.attr("a", "href") if a]


async def test_the_review_is_for_leads_and_admins_and_only_they_have_it_in_the_nav(client: httpx.AsyncClient):
    assert (await client.get("/panel/review", headers=bearer("ana"))).status_code == 403
    assert "/panel/review" not in (await client.get("/panel", headers=bearer("ana"))).text
    nav = Page((await client.get("/panel", headers=bearer("lee"))).text)
    assert "/panel/review" in nav.attr("a", "href")
    page = await client.get("/panel/review", headers={"Accept": "text/html"})
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/panel/review"


async def test_approving_serves_an_entry_and_retiring_stops_it(client: httpx.AsyncClient, stocked: Shelf):
    async def found() -> list[str]:
        hits = await stocked.knowledge.search("my parcel says delivered but it never arrived", 3, tenant="globex")
        return [hit.entry_id for hit in hits]

    assert "case-parcel" not in await found()
    approved = await client.post("/api/knowledge/case-parcel/approve", headers=bearer("lee"))
    assert approved.status_code == 200
    assert approved.json() == {"entry_id": "case-parcel", "status": "active"}
    assert await stocked.status("case-parcel") == "active"
    assert (await found())[0] == "case-parcel"
    retired = await client.post("/api/knowledge/case-parcel/retire", headers=bearer("lee"))
    assert retired.json() == {"entry_id": "case-parcel", "status": "retired"}
    assert "case-parcel" not in await found()
    listed = Page((await client.get("/panel/review?status=retired", headers=bearer("lee"))).text)
    assert listed.attr("li", "data-entry-id", class_="review") == ["case-parcel"]
    pending = Page((await client.get("/panel/review", headers=bearer("lee"))).text)
    assert pending.attr("li", "data-entry-id", class_="review") == ["case-fee"]


async def test_the_api_refuses_analysts_other_tenants_unknown_entries_and_forged_requests(
    client: httpx.AsyncClient, stocked: Shelf
):
    url = "/api/knowledge/case-parcel/approve"
    assert (await client.post(url)).status_code == 401
    assert (await client.post(url, headers=bearer("ana"))).status_code == 403  # an analyst
    acme = await client.post("/api/knowledge/case-router/retire", headers=bearer("lee"))  # not lee's tenant
    assert acme.status_code == 404 and acme.json() == {"detail": "unknown knowledge entry"}
    assert (await client.post("/api/knowledge/no-such-entry/approve", headers=bearer("lee"))).status_code == 404
    # An entry for every tenant is decided by someone of every tenant: not by an admin of acme alone.
    assert (await client.post("/api/knowledge/hub-lights/retire", headers=bearer("ada"))).status_code == 403
    assert (await client.post("/api/knowledge/hub-lights/retire", headers=bearer("root"))).status_code == 200
    assert await stocked.status("hub-lights") == "retired"
    assert await stocked.status("case-router") == "pending_review"
    assert await stocked.status("case-parcel") == "pending_review"
    # A signed-in browser needs the session's CSRF token, and a same-origin request.
    csrf = await sign_in(client, "lee")
    assert (await client.post(url)).status_code == 403
    elsewhere = await client.post(url, headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example"})
    assert elsewhere.status_code == 403
    assert await stocked.status("case-parcel") == "pending_review"
    assert (await client.post(url, headers={"X-CSRF-Token": csrf})).status_code == 200
    assert await stocked.status("case-parcel") == "active"


async def test_without_a_knowledge_store_every_entry_is_unknown(store: CaseStore, registry):  # type: ignore[no-untyped-def]
    app = panel_app(store, MemoryOutbox(), registry)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as c:
        assert (await c.post("/api/knowledge/case-parcel/approve", headers=bearer("root"))).status_code == 404
        page = await c.get("/panel/review", headers=bearer("root"))
    assert page.status_code == 200 and "Nothing waits for review." in page.text


async def test_a_mined_entry_s_page_shows_its_status_and_links_its_cases(client: httpx.AsyncClient):
    answer = await client.get("/panel/knowledge/case-fee", headers=bearer("lee"))
    assert answer.status_code == 200
    page = Page(answer.text)
    # Its url is a panel path: a link to the case whose resolution it states, in the same tab.
    [original] = [a for t, a, text in page.elements if t == "a" and "open the case it came from" in "".join(text)]
    assert original["href"] == "/panel/conversations/g-1" and "target" not in original
    assert page.text("dd", data_fact="status") == ["Waiting for review (not served)"]
    links = page.attr("a", "href")
    assert "/panel/conversations/g-2" in links and "/panel/review" in links  # a lead is sent to review it
    assert page.text("section", class_="conflicting")[0].endswith(FEE_OTHER)
    # An analyst of the tenant reads it too, without the way to the review; another tenant's is not there.
    for_analyst = await client.get("/panel/knowledge/case-router", headers=bearer("ana"))
    assert for_analyst.status_code == 200 and "/panel/conversations/a-1" in for_analyst.text
    assert "/panel/review" not in for_analyst.text
    assert (await client.get("/panel/knowledge/case-fee", headers=bearer("ana"))).status_code == 404
    # An imported article keeps its plain footer: no cases, and served.
    article = Page((await client.get("/panel/knowledge/hub-lights", headers=bearer("ana"))).text)
    assert article.text("dd", data_fact="status") == ["Served to analysts"]
    assert article.text("section", class_="mined") == []


async def test_what_the_real_miner_writes_is_shown_with_its_conflict_side_by_side(
    store: CaseStore, registry, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    knowledge = KnowledgeStore(
        engine=store.engine, embedder=embedder, clock=SystemClock(), chroma_path=tmp_path / "chroma"
    )
    await knowledge.open()
    try:
        await record(store, conversation("fee-1", [("customer", FEE_PROBLEM), ("analyst", FEE_KEPT)]))
        await record(
            store,
            conversation(
                "fee-2",
                [("customer", "will I get the cancellation fee back if I cancel the subscription box?"),
                 ("analyst", FEE_OTHER)],
                at=START + timedelta(hours=1),
            ),
        )  # fmt: skip
        settings = MinerSettings(min_analyst_words=0)  # two short answers: enough to disagree
        miner = Miner(settings, engine=store.engine, knowledge=knowledge, clock=SystemClock())
        assert (await miner.run()).entries["pending_review"] == 1
        app = panel_app(store, MemoryOutbox(), registry, knowledge=knowledge)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as c:
            html = (await c.get("/panel/review", headers=bearer("root"))).text
        page = Page(html)
        [entry_id] = page.attr("li", "data-entry-id", class_="review")
        box = Page(entry_box(html, str(entry_id)))
        [kept], [other] = box.text("section", class_="kept"), box.text("section", class_="conflicting")
        assert "cancellation fee" in kept and "cancellation fee" in other
        assert ("not refundable" in kept) != ("not refundable" in other)  # one side each
        assert sorted(box.attr("li", "data-conversation-id", class_="case")) == ["fee-1", "fee-2"]
        assert "/panel/conversations/fee-1" in box.attr("a", "href")
    finally:
        await knowledge.close()
