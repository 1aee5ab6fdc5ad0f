"""The intervention policy: when vigil speaks up with an answer (more of its rules in test_skill.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from vigil.answers.intervention import InterventionPolicy
from vigil.app.settings import AnswerSettings
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.wire.events import Message, SourceRef, Suggestion, parse

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def customer(conversation: str, message_id: str, text: str) -> Message:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": message_id,
        "conversation_id": conversation,
        "sent_at": NOW.isoformat(),
        "role": "customer",
        "text": text,
    }
    event = parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Message)
    return event


def open_case(conversation: str) -> CaseState:
    return CaseState(conversation, "default", "open", None, None, NOW, NOW, None, 1)


async def test_conversations_reusing_a_message_id_do_not_share_their_earlier_suggestions(store: CaseStore):
    # Ids are unique only within a conversation: c-2's m1 is not c-1's.
    await store.save_suggestion(
        Suggestion(
            suggestion_id="s1",
            conversation_id="c-1",
            tenant="default",
            in_reply_to="m0",
            created_at=NOW,
            kind="answer",
            text="We take payment on the 1st of each month.",
            confidence=0.9,
            sources=[SourceRef(kind="faq", id="faq-bill-date")],
            latency_ms=1.0,
        )
    )
    policy = InterventionPolicy(store=store, clock=ManualClock(NOW), settings=AnswerSettings(cooldown_s=20))
    first, second = customer("c-1", "m1", "When is the bill issued?"), customer("c-2", "m1", "When do you take it?")
    assert (await policy.admit("answer", first, open_case("c-1"))).reason == "cooldown"
    assert (await policy.admit("answer", second, open_case("c-2"))).speak
    proposal = Proposal(
        kind="answer",
        text="We take payment on the 1st of each month.",
        confidence=0.9,
        sources=(SourceRef(kind="faq", id="faq-bill-date"),),
    )
    assert (await policy.review(proposal, second, open_case("c-2"))).speak
    assert (await policy.review(proposal, first, open_case("c-1"))).reason == "repeated_source"
