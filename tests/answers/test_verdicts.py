"""The analysts' verdicts on answers are kept with their feedback and teach the knowledge: in the real pipeline, a
dismissal changes the answer to the next customer with the same need, in that tenant only."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from tests.conftest import RememberingEmbedder
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.knowledge.tables import VERDICT
from vigil.testing import Wired, wired
from vigil.wire.events import Feedback, Message, Suggestion, parse

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"
WRONG = "faq-leave-without-number"  # STAC: for leaving without the number
ASKED = "I want to leave brightwave but keep my mobile number"  # they need a PAC
AGAIN = "I'm leaving Brightwave but want to keep my mobile number"


def customer(conversation: str, text: str, tenant: str, at: datetime = NOW) -> Message:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation}-m1",
        "conversation_id": conversation,
        "tenant": tenant,
        "sent_at": at.isoformat(),
        "role": "customer",
        "text": text,
    }
    event = parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Message)
    return event


def verdict(on: Suggestion, said: str, at: datetime, text: str | None = None) -> Feedback:
    return Feedback(
        type="feedback",
        schema_version=1,
        feedback_id=f"{on.suggestion_id}-{said}",
        suggestion_id=on.suggestion_id,
        conversation_id=on.conversation_id,
        verdict=said,  # type: ignore[arg-type]
        by="ana",
        at=at,
        text=text,
    )


def answers_on() -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        answers={"enabled": True},  # type: ignore[arg-type]
        knowledge={"paths": [KNOWLEDGE / "articles", KNOWLEDGE / "faqs"]},  # type: ignore[arg-type]
    )


def answer_to(vigil: Wired, conversation: str) -> Suggestion:
    return next(s for s in vigil.published if s.conversation_id == conversation and s.kind == "answer")


async def test_a_dismissal_changes_the_next_similar_questions_answer_in_that_tenant_only(
    tmp_path: Path, embedder: RememberingEmbedder
):
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=answers_on(), clock=clock, embedder=embedder) as vigil:
        await vigil.send(customer("c-1", ASKED, "brightwave"))
        wrong = answer_to(vigil, "c-1")
        assert wrong.sources[0].id == WRONG
        clock.advance(30)
        await vigil.send(verdict(wrong, "dismissed", clock.now(), "they keep the number: a PAC, not a STAC"))
        # Learned at the knowledge's next refresh, on every replica.
        await vigil.advance(clock.now() + timedelta(seconds=answers_on().knowledge.refresh_interval_s))
        await vigil.send(
            customer("c-2", AGAIN, "brightwave", clock.now()), customer("c-3", AGAIN, "sparkline", clock.now())
        )
        assert answer_to(vigil, "c-2").sources[0].id != WRONG
        assert answer_to(vigil, "c-3").sources[0].id == WRONG  # another tenant's analysts said nothing of it


async def test_a_verdict_is_kept_once_with_the_question_it_answered(tmp_path: Path, embedder: RememberingEmbedder):
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=answers_on(), clock=clock, embedder=embedder) as vigil:
        await vigil.send(customer("c-1", ASKED, "brightwave"))
        answer = answer_to(vigil, "c-1")
        edited = verdict(answer, "edited", clock.now(), "Text PAC to 65075 and give the code to your new provider.")
        await vigil.send(edited, edited)  # delivered twice
        async with vigil.store.engine.connect() as conn:
            kept = (await conn.execute(sa.select(VERDICT))).all()
        assert [(k.tenant, k.entry_id, k.verdict, k.question, k.text, k.message_id) for k in kept] == [
            ("brightwave", WRONG, "edited", ASKED, edited.text, "c-1-m1")
        ]


async def test_feedback_on_a_suggestion_vigil_does_not_know_keeps_no_verdict(
    tmp_path: Path, embedder: RememberingEmbedder
):
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=answers_on(), clock=clock, embedder=embedder) as vigil:
        await vigil.send(customer("c-1", ASKED, "brightwave"))
        unknown = Feedback(
            type="feedback",
            schema_version=1,
            feedback_id="f-1",
            suggestion_id="s-from-elsewhere",
            conversation_id="c-1",
            verdict="dismissed",
            at=clock.now(),
        )
        await vigil.send(unknown)
        assert not vigil.dead_letters
        async with vigil.store.engine.connect() as conn:
            assert (await conn.execute(sa.select(sa.func.count()).select_from(VERDICT))).scalar() == 0
