"""Analysts' replies as answers for a lead's review: what an analyst wrote to a question vigil did not answer, or
answered and was told it was wrong, and that settled it, says what the customer should have been told.

In each case the miner takes, a customer message vigil's skills saw (it has ``finished_at``: history imported
without vigil proposes nothing) that asks something (``vigil.cases.questions``, the rules the answers' gate speaks
by) is *unanswered* when vigil published no answer to it (``silent``) or the analyst dismissed the one it published
(``dismissed``); it must stand on its own as an FAQ's question does (``standalone``: not a follow-up such as "ok,
and if it doesn't come?"). The analysts' messages after it, up to the customer's next message, hold the reply: its
resolving turns (``distil.resolving``), each without its greetings, chatter and questions back. The reply *settled*
the question when the customer did not ask again (their next message asks nothing, or there is none), and it
teaches when it tells the customer what to do or how things work (``distil.instructs``) in ``min_words`` words or
more: "I've passed this to the claims team" settles one customer's question and tells the next one nothing.

On the tune company's replayed history (``bench.eval_learning``, Kestrel), these two rules took the candidates from
31 of 62 closed cases (half of them follow-ups or what the analyst did) to 7 (docs/evaluation.md).

Each becomes an FAQ of its tenant waiting for review (``candidates.py``): the question and the reply, redacted, with
provenance to the messages, who replied, and whether vigil was silent or which entry it was dismissed from. Its id
is the hash of its tenant and both texts as redacted: the copies of one chat (a demo loop, two customers told the
same thing in the same words) propose it once. A case the miner records as a repeat proposes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.questions import classify
from vigil.cases.tables import FEEDBACK, SUGGESTION
from vigil.knowledge.documents import Entry
from vigil.knowledge.store import REPLIED, Governance
from vigil.mining import candidates
from vigil.mining.distil import instructs, resolving, substance, ungreeted, words
from vigil.mining.select import ClosedCase, Turn

ORIGIN = REPLIED
"""The ``origin`` of an entry proposed from an analyst's reply."""
_FIRST_WORD = re.compile(r"[a-z']+")
_FOLLOW_UP = frozenset(
    "ok okay k ah oh and so but also then thanks thank ty great cool nice lovely perfect right done yes yeah yep no "
    "nope hmm well alright fine sure".split()
)
"""Words a follow-up opens with: what it asks leans on what was said before."""


@dataclass(frozen=True, slots=True)
class Answered:
    """What vigil answered a customer message with, as the analyst judged it."""

    suggestion_id: str
    entry_id: str | None
    """The entry the answer cited first."""
    dismissed: bool


@dataclass(frozen=True, slots=True)
class Reply:
    """An analyst's reply that settled a question vigil did not answer."""

    conversation_id: str
    tenant: str
    question: str
    question_id: str
    text: str
    reply_ids: tuple[str, ...]
    by: str | None
    sent_at: datetime
    vigil: str
    """``silent``, or ``dismissed``: what vigil had said."""
    answer: Answered | None
    names: tuple[str, ...]


async def answers(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[tuple[str, str], Answered]:
    """The answers vigil published in these conversations, by (conversation, message answered); where it published
    several to one message, one the analyst did not dismiss, if any."""
    found: dict[tuple[str, str], Answered] = {}
    for start in range(0, len(conversation_ids), 500):  # bound the IN list
        chunk = list(conversation_ids[start : start + 500])
        dismissed = (
            sa.select(FEEDBACK.c.suggestion_id)
            .where(FEEDBACK.c.conversation_id.in_(chunk), FEEDBACK.c.verdict == "dismissed")
            .subquery()
        )
        rows = await conn.execute(
            sa.select(
                SUGGESTION.c.conversation_id,
                SUGGESTION.c.in_reply_to,
                SUGGESTION.c.suggestion_id,
                SUGGESTION.c.sources,
                dismissed.c.suggestion_id.is_not(None).label("dismissed"),
            )
            .outerjoin(dismissed, dismissed.c.suggestion_id == SUGGESTION.c.suggestion_id)
            .where(
                SUGGESTION.c.conversation_id.in_(chunk),
                SUGGESTION.c.kind == "answer",
                SUGGESTION.c.in_reply_to.is_not(None),
                SUGGESTION.c.published_at.is_not(None),
            )
            .order_by(SUGGESTION.c.created_at, SUGGESTION.c.suggestion_id)
        )
        for row in rows:
            key = (row.conversation_id, row.in_reply_to)
            if key in found and not found[key].dismissed:
                continue
            sources = row.sources or []
            cited = str(sources[0]["id"]) if sources and sources[0].get("id") else None
            found[key] = Answered(row.suggestion_id, cited, bool(row.dismissed))
    return found


def found(case: ClosedCase, answered: dict[tuple[str, str], Answered], *, min_words: int) -> Iterator[Reply]:
    """The replies in ``case`` that settled a question vigil did not answer (``answered``: what it did answer)."""
    turns = case.turns
    for n, turn in enumerate(turns):
        if turn.role != "customer" or turn.finished_at is None or not standalone(turn.text):
            continue
        answer = answered.get((case.conversation_id, turn.message_id))
        if answer is not None and not answer.dismissed:
            continue
        after = _until_customer(turns[n + 1 :])
        following = n + 1 + len(after)
        if following < len(turns) and classify(turns[following].text).asks:
            continue  # the customer asked again: the reply did not settle it
        chosen = resolving([t for t in after if t.role == "analyst"])
        text = " ".join(" ".join(substance(t.text).split()) for t in chosen)
        if not chosen or words(text) < min_words or not instructs(text):
            continue  # thin, or it says only what the analyst did ("I've passed it on"): nothing to tell the next
        yield Reply(
            conversation_id=case.conversation_id,
            tenant=case.tenant,
            question=ungreeted(turn.text),
            question_id=turn.message_id,
            text=text,
            reply_ids=tuple(t.message_id for t in chosen),
            by=chosen[-1].author,
            sent_at=chosen[-1].sent_at,
            vigil="silent" if answer is None else "dismissed",
            answer=answer,
            names=tuple(sorted(case.authors)),
        )


def standalone(text: str) -> bool:
    """Whether ``text`` asks something that stands on its own, as an FAQ's question must: it asks, and it does not
    open as a follow-up of what was said before ("ok, and if it doesn't come?", "thanks. can I tell them a date?")."""
    first = _FIRST_WORD.search(text.lower())
    return classify(text).asks and (first is None or first.group(0) not in _FOLLOW_UP)


def _until_customer(turns: Sequence[Turn]) -> Sequence[Turn]:
    for n, turn in enumerate(turns):
        if turn.role == "customer":
            return turns[:n]
    return turns


def entry_id(tenant: str, question: str, answer: str) -> str:
    """The id of the candidate a reply makes, from its texts as redacted: the same texts, the same candidate."""
    key = f"{tenant}\0{' '.join(question.lower().split())}\0{' '.join(answer.lower().split())}"
    return f"reply-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def candidate(reply: Reply, redact: Callable[[str, Iterable[str]], str]) -> tuple[Entry, Governance]:
    """The FAQ a reply proposes, waiting for review, with where it came from; ``redact(text, names)`` takes out
    what identifies people."""
    question, answer = redact(reply.question, reply.names), redact(reply.text, reply.names)
    cited = reply.answer.entry_id if reply.answer is not None else None
    return candidates.proposed(
        entry_id=entry_id(reply.tenant, question, answer),
        origin=ORIGIN,
        tenant=reply.tenant,
        conversation_id=reply.conversation_id,
        question=question,
        answer=answer,
        disagrees_with=[cited] if cited else [],
        source={
            "vigil": reply.vigil,
            "conversation_id": reply.conversation_id,
            "message_id": reply.question_id,
            "reply_ids": list(reply.reply_ids),
            "suggestion_id": reply.answer.suggestion_id if reply.answer is not None else None,
            "of": cited,
            "by": reply.by,
            "sent_at": reply.sent_at.isoformat(),
        },
    )
