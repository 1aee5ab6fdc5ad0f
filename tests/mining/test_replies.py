"""An analyst's reply that settled a question vigil did not answer becomes an FAQ waiting for a lead's review, with
where it came from; approved, it answers the next customer who asks so.

First the rule on cases as the miner reads them, then the whole loop in the real pipeline: vigil silent on a
question, the analyst's reply, the case closed, the miner's run, the lead's approval, the next customer answered."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.conftest import RememberingEmbedder
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.knowledge.tables import ENTRY
from vigil.mining import replies
from vigil.mining.miner import Miner
from vigil.mining.select import ClosedCase, Turn
from vigil.mining.settings import MinerSettings
from vigil.panel.display import Display
from vigil.panel.review import reviewed
from vigil.testing import Wired, wired
from vigil.wire.events import Event, Feedback, Suggestion, parse

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"
ASKED = "Can I pay my bill in cash at a Post Office counter?"
REPLY = (
    "Yes, you can. Go to any Post Office counter with your bill and quote the 16-digit payment reference printed "
    "under the barcode. Payments in cash reach your account within two working days."
)
THANKS = "brilliant, thanks Sam"
AGAIN = "is it possible to pay my bill with cash at the post office?"


def case(*turns: tuple[str, str], seen: bool = True, cid: str = "c-1") -> ClosedCase:
    """A closed case of ``turns`` (role, text), a minute apart; ``seen``: vigil's skills saw its messages."""
    return ClosedCase(
        conversation_id=cid,
        tenant="brightwave",
        closed_at=NOW + timedelta(hours=1),
        summary=None,
        csat=5,
        turns=tuple(
            Turn(
                f"{cid}-m{n}",
                role,
                "Dana Reyes" if role == "customer" else "sam.k",
                text,
                NOW + timedelta(minutes=n),
                NOW + timedelta(minutes=n) if seen else None,
            )
            for n, (role, text) in enumerate(turns, start=1)
        ),
    )


def found(of: ClosedCase, answered: dict[tuple[str, str], replies.Answered] | None = None) -> list[replies.Reply]:
    return list(replies.found(of, answered or {}, min_words=8))


def test_a_reply_that_settled_a_question_vigil_was_silent_on_is_found_with_its_messages():
    [reply] = found(case(("customer", f"Hi, {ASKED}"), ("analyst", f"Hi Dana! {REPLY}"), ("customer", THANKS)))
    assert (reply.question, reply.text, reply.vigil, reply.answer) == (ASKED, REPLY, "silent", None)
    assert (reply.question_id, reply.reply_ids, reply.by) == ("c-1-m1", ("c-1-m2",), "sam.k")


def test_the_reply_is_the_resolving_turns_before_the_customer_writes_again():
    [reply] = found(
        case(
            ("customer", ASKED),
            ("analyst", "Let me check that for you."),
            ("analyst", REPLY),
            ("analyst", "Is there anything else I can help with?"),
        )
    )
    assert reply.text == REPLY and reply.reply_ids == ("c-1-m3",)


def test_a_question_vigil_answered_and_no_one_dismissed_teaches_nothing_new():
    answered = {("c-1", "c-1-m1"): replies.Answered("s-1", "faq-payments", dismissed=False)}
    assert found(case(("customer", ASKED), ("analyst", REPLY), ("customer", THANKS)), answered) == []


def test_a_dismissed_answer_s_question_proposes_the_reply_against_the_entry_it_came_from():
    answered = {("c-1", "c-1-m1"): replies.Answered("s-1", "faq-payments", dismissed=True)}
    [reply] = found(case(("customer", ASKED), ("analyst", REPLY), ("customer", THANKS)), answered)
    assert reply.vigil == "dismissed" and reply.answer == answered["c-1", "c-1-m1"]


def test_a_reply_the_customer_answers_with_another_question_did_not_settle_it():
    assert found(case(("customer", ASKED), ("analyst", REPLY), ("customer", "That doesn't work, it says no?"))) == []


def test_a_follow_up_that_leans_on_what_was_said_before_is_no_faq_s_question():
    assert found(case(("customer", ASKED), ("customer", "ok, and what if I pay by cheque?"), ("analyst", REPLY))) == []


def test_a_reply_that_says_only_what_the_analyst_did_tells_the_next_customer_nothing():
    did = "I've passed this to the billing team and asked them to update you today."
    assert found(case(("customer", ASKED), ("analyst", did), ("customer", THANKS))) == []


def test_history_vigil_never_saw_small_talk_and_thin_replies_propose_nothing():
    assert found(case(("customer", ASKED), ("analyst", REPLY), seen=False)) == []
    assert found(case(("customer", "thanks, that's great"), ("analyst", REPLY))) == []
    assert found(case(("customer", ASKED), ("analyst", "Yes, you can."), ("customer", THANKS))) == []


# The loop, in the real pipeline.


def answers_on(db_url: str | None = None) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        answers={"enabled": True},  # type: ignore[arg-type]
        **({"database": {"url": db_url}} if db_url else {}),  # type: ignore[arg-type]
        knowledge={"paths": [KNOWLEDGE / "articles", KNOWLEDGE / "faqs"]},  # type: ignore[arg-type]
    )


def event(**fields: Any) -> Event:
    raw = {"schema_version": 1, "tenant": "brightwave", **fields}
    return parse(json.dumps(raw, default=str).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)


def chat(cid: str, turns: Sequence[tuple[str, str]], at: datetime, customer: str = "Dana Reyes") -> list[Event]:
    return [
        event(
            type="message",
            message_id=f"{cid}-m{n}",
            conversation_id=cid,
            sent_at=at + timedelta(seconds=n),
            role=role,
            author=customer if role == "customer" else "sam.k",
            text=text,
        )
        for n, (role, text) in enumerate(turns, start=1)
    ]


def closed(cid: str, at: datetime) -> Event:
    return event(
        type="case",
        event_id=f"{cid}-close",
        conversation_id=cid,
        at=at,
        event="closed",
        resolution={"resolved_by": "human", "csat": 5},
    )


def answers_to(vigil: Wired, cid: str) -> list[Suggestion]:
    return [s for s in vigil.published if s.conversation_id == cid and s.kind == "answer"]


async def candidates(vigil: Wired) -> list[Any]:
    async with vigil.store.engine.connect() as conn:
        return list((await conn.execute(sa.select(ENTRY).where(ENTRY.c.origin == replies.ORIGIN))).all())


async def test_the_reply_to_a_question_vigil_could_not_answer_answers_the_next_customer_once_approved(
    tmp_path: Path, embedder: RememberingEmbedder, db_url: str
):
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=answers_on(db_url), clock=clock, embedder=embedder) as vigil:
        miner = Miner(MinerSettings(), engine=vigil.store.engine, knowledge=vigil.parts.knowledge, clock=clock)
        # Two customers asked; vigil said nothing; the analyst told each the same thing, and they were satisfied.
        for cid, customer in (("c-1", "Dana Reyes"), ("c-2", "Owen Price")):
            await vigil.send(
                *chat(cid, [("customer", ASKED), ("analyst", REPLY), ("customer", THANKS)], clock.now(), customer)
            )
            assert answers_to(vigil, cid) == []
            clock.advance(60)
            await vigil.send(closed(cid, clock.now()))
        report = await miner.run()
        assert report.replies == 1 and "1 analysts' replies proposed for review" in report.summary()
        [row] = await candidates(vigil)
        assert (row.kind, row.status, row.tenant, row.questions, row.body) == (
            "faq",
            "pending_review",
            "brightwave",
            [ASKED],
            REPLY,
        )
        source = row.provenance[replies.ORIGIN]
        assert (source["vigil"], source["conversation_id"], source["message_id"], source["reply_ids"]) == (
            "silent",
            "c-1",
            "c-1-m1",
            ["c-1-m2"],
        )
        # Waiting for review, it is not served.
        await vigil.send(*chat("c-3", [("customer", AGAIN)], clock.now()))
        assert all(row.id not in [s.id for s in a.sources] for a in answers_to(vigil, "c-3"))
        # Approved, the next customer who asks so is answered from it (at the knowledge's next refresh).
        assert await vigil.parts.knowledge.govern(row.id, status="active")
        await vigil.advance(clock.now() + timedelta(seconds=answers_on().knowledge.refresh_interval_s))
        await vigil.send(*chat("c-4", [("customer", AGAIN)], clock.now()))
        [answer] = answers_to(vigil, "c-4")
        assert answer.sources[0].id == row.id and "payment reference" in answer.text
        # A later run proposes nothing again: the lead's decision stands.
        assert (await miner.run()).replies == 0
        [row] = await candidates(vigil)
        assert row.status == "active"


async def test_the_reply_after_a_dismissed_answer_is_proposed_beside_the_entry_it_came_from(
    tmp_path: Path, embedder: RememberingEmbedder, db_url: str
):
    clock = ManualClock(NOW)
    asked = "I want to leave brightwave but keep my mobile number"
    told = "You need to text PAC to 65075 and give the code to your new provider within 30 days."
    async with wired(tmp_path, settings=answers_on(db_url), clock=clock, embedder=embedder) as vigil:
        await vigil.send(*chat("c-1", [("customer", asked)], clock.now()))
        [wrong] = answers_to(vigil, "c-1")
        dismissal = Feedback(
            type="feedback",
            schema_version=1,
            feedback_id="f-1",
            suggestion_id=wrong.suggestion_id,
            conversation_id="c-1",
            verdict="dismissed",
            by="sam.k",
            at=clock.now(),
        )
        await vigil.send(dismissal)
        clock.advance(30)
        await vigil.send(*chat("c-1", [("customer", asked), ("analyst", told), ("customer", THANKS)], clock.now())[1:])
        await vigil.send(closed("c-1", clock.now() + timedelta(seconds=10)))
        clock.advance(60)
        miner = Miner(MinerSettings(), engine=vigil.store.engine, knowledge=vigil.parts.knowledge, clock=clock)
        assert (await miner.run()).replies == 1
        [row] = await candidates(vigil)
        assert row.body.startswith("You need to text PAC to")  # the short code redacted as an id
        assert row.provenance["conflicts_with"] == [wrong.sources[0].id]
        source = row.provenance[replies.ORIGIN]
        assert (source["vigil"], source["suggestion_id"], source["of"]) == (
            "dismissed",
            wrong.suggestion_id,
            wrong.sources[0].id,
        )
        # The review page shows the question and the reply, beside the entry it would replace.
        [original] = await vigil.parts.knowledge.governed(ids=[wrong.sources[0].id])
        shown = reviewed(dict(row._mapping), Display(), NOW, {original["id"]: reviewed(original, Display(), NOW)})
        assert shown.kept is not None and shown.kept.href == "/panel/conversations/c-1"
        assert shown.kept.problem == asked and shown.kept.steps == (row.body,)
        assert [r.id for r in shown.rivals] == [wrong.sources[0].id]
        assert shown.proposed == "sam.k's reply after vigil's answer was dismissed"


async def test_with_replies_off_the_miner_proposes_none(tmp_path: Path, embedder: RememberingEmbedder):
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=answers_on(), clock=clock, embedder=embedder) as vigil:
        await vigil.send(*chat("c-1", [("customer", ASKED), ("analyst", REPLY), ("customer", THANKS)], clock.now()))
        clock.advance(60)
        await vigil.send(closed("c-1", clock.now()))
        settings = MinerSettings(replies=False)
        miner = Miner(settings, engine=vigil.store.engine, knowledge=vigil.parts.knowledge, clock=clock)
        assert (await miner.run()).replies == 0
        assert await candidates(vigil) == []
