"""An analyst's edit of an answer becomes an FAQ waiting for a lead's review, with where it came from: on both
databases, with the real model and the verdicts kept as the daemon keeps them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import help_centre, open_knowledge
from vigil.answers.verdicts import VerdictKeeper
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.knowledge.store import KnowledgeStore
from vigil.knowledge.tables import ENTRY
from vigil.mining.miner import Miner
from vigil.mining.settings import MinerSettings
from vigil.panel.display import Display
from vigil.panel.review import reviewed
from vigil.wire.events import Event, SourceRef, Suggestion, parse

START = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
ASKED = "I want to leave brightwave but keep my mobile number"
EDITED = "Hi Dana, to keep your number text PAC to 65075 and give the code to your new provider within 30 days."


def event(**fields: Any) -> Event:
    return parse(json.dumps({"schema_version": 1, **fields}).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)


@pytest.fixture
async def knowledge(store: CaseStore, tmp_path: Path, embedder) -> AsyncIterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    store.keep_with([VerdictKeeper()])
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)
    await knowledge.upsert(help_centre())
    try:
        yield knowledge
    finally:
        await knowledge.close()


async def answered_and_judged(store: CaseStore, verdict: str, text: str | None, cid: str = "c-1") -> None:
    """Dana asked; vigil answered from the STAC FAQ; the analyst gave ``verdict`` (with ``text``)."""
    at = START.isoformat()
    await store.record(
        event(
            type="message",
            message_id=f"{cid}-m1",
            conversation_id=cid,
            tenant="brightwave",
            sent_at=at,
            role="customer",
            author="Dana Reyes",
            text=ASKED,
        )
    )
    await store.save_suggestion(
        Suggestion(
            suggestion_id=f"{cid}-s1",
            conversation_id=cid,
            tenant="brightwave",
            in_reply_to=f"{cid}-m1",
            created_at=START + timedelta(seconds=1),
            kind="answer",
            text="Text STAC to 75075 from your Brightwave phone.",
            confidence=0.97,
            sources=[SourceRef(kind="faq", id="faq-leave-without-number", title="leave", score=1.0)],
            latency_ms=50.0,
        )
    )
    fields = {"text": text} if text is not None else {}
    await store.record(
        event(
            type="feedback",
            feedback_id=f"{cid}-f1",
            suggestion_id=f"{cid}-s1",
            conversation_id=cid,
            verdict=verdict,
            by="sam.k",
            at=(START + timedelta(minutes=1)).isoformat(),
            **fields,
        )
    )


def miner(store: CaseStore, knowledge: KnowledgeStore) -> Miner:
    return Miner(MinerSettings(), engine=store.engine, knowledge=knowledge, clock=SystemClock())


async def proposed(store: CaseStore) -> list[Any]:
    async with store.engine.connect() as conn:
        return list((await conn.execute(sa.select(ENTRY).where(ENTRY.c.origin == "edit"))).all())


async def test_an_edit_becomes_an_faq_waiting_for_review_with_where_it_came_from(store, knowledge):
    await answered_and_judged(store, "edited", EDITED)
    report = await miner(store, knowledge).run()
    assert report.edits == 1 and "1 analysts' edits proposed for review" in report.summary()
    [row] = await proposed(store)
    assert (row.kind, row.status, row.tenant) == ("faq", "pending_review", "brightwave")
    assert row.questions == [ASKED] and "to keep your number text PAC to" in row.body
    assert "Dana" not in row.body  # redacted as mined entries are
    edit = row.provenance["edit"]
    assert (edit["of"], edit["conversation_id"], edit["message_id"], edit["suggestion_id"], edit["by"]) == (
        "faq-leave-without-number",
        "c-1",
        "c-1-m1",
        "c-1-s1",
        "sam.k",
    )
    # The review page links the conversation, shows the question and the reply as sent, and sets it beside the entry
    # it would replace.
    [original] = await knowledge.governed(ids=["faq-leave-without-number"])
    shown = reviewed(dict(row._mapping), Display(), START, {original["id"]: reviewed(original, Display(), START)})
    assert shown.kept is not None and shown.kept.href == "/panel/conversations/c-1"
    assert shown.kept.problem == ASKED and shown.kept.steps == (row.body,)
    assert [r.id for r in shown.rivals] == ["faq-leave-without-number"]
    assert shown.proposed == "sam.k's edit of vigil's answer"
    assert all(h.entry_id != row.id for h in await knowledge.search(ASKED, 5, tenant="brightwave"))


async def test_approved_it_is_served_to_its_tenant_and_a_rerun_never_undoes_the_lead_s_decision(store, knowledge):
    await answered_and_judged(store, "edited", EDITED)
    await miner(store, knowledge).run()
    [row] = await proposed(store)
    assert await knowledge.govern(row.id, status="active")
    again = await miner(store, knowledge).run()
    assert again.edits == 0
    [row] = await proposed(store)
    assert row.status == "active"
    hits = await knowledge.search("how do I keep my mobile number when I leave brightwave", 5, tenant="brightwave")
    assert row.id in [h.entry_id for h in hits]
    elsewhere = await knowledge.search("how do I keep my mobile number when I leave brightwave", 5, tenant="sparkline")
    assert row.id not in [h.entry_id for h in elsewhere]


async def test_acceptances_and_dismissals_propose_nothing(store, knowledge):
    await answered_and_judged(store, "accepted", None, cid="c-1")
    await answered_and_judged(store, "dismissed", "they want to keep the number", cid="c-2")
    assert (await miner(store, knowledge).run()).edits == 0
    assert await proposed(store) == []
