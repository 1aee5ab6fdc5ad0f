"""The analysts' verdicts on answers, kept for the knowledge to learn from (``vigil.knowledge.verdicts``).

A ``feedback`` event that accepts, edits or dismisses an ``answer`` suggestion is kept, in the transaction that
records the event (a ``Keeper``, ``vigil.flow.keeping``), as the knowledge's verdict: the tenant, the customer's
message the answer replied to, the entry it cited first, the verdict, and an edit's text or a dismissal's reason. So a
verdict the panel was told was taken is never lost to a crash before it is learned, and is kept once however often
the event is delivered. Verdicts on other suggestions (actions, progress) and feedback on a suggestion vigil does
not know are not answers' to keep.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import FEEDBACK, MESSAGE, SUGGESTION, first_source
from vigil.flow.case import CaseState
from vigil.knowledge.verdicts import SIGNS, Verdict, record
from vigil.wire.events import Event, Feedback

ANSWER = "answer"


class VerdictKeeper:
    """Keeps each verdict on an answer as the knowledge's, with the question it answered."""

    name = "answers"

    async def keep(self, conn: AsyncConnection, event: Event, case: CaseState | None) -> None:
        if not isinstance(event, Feedback) or event.verdict not in SIGNS:
            return
        judged = (await conn.execute(_judged(event))).first()
        if judged is None or judged.kind != ANSWER:
            return  # not an answer, or an answer to no message vigil holds
        entry_id = first_source(judged.sources)
        if entry_id is None:
            return
        await record(
            conn,
            Verdict(
                conversation_id=event.conversation_id,
                feedback_id=event.feedback_id,
                tenant=judged.tenant,
                entry_id=entry_id,
                verdict=event.verdict,
                question=judged.question,
                suggestion_id=event.suggestion_id,
                message_id=judged.in_reply_to,
                at=event.at,
                received_at=judged.received_at,
                by=event.by,
                text=event.text,
            ),
        )


def _judged(event: Feedback) -> sa.Select[Any]:
    """The suggestion ``event`` judges (of its own conversation: the store refused one of another), when it replied
    to a message, with that message's text and when the feedback was received."""
    return (
        sa.select(
            SUGGESTION.c.kind,
            SUGGESTION.c.tenant,
            SUGGESTION.c.sources,
            SUGGESTION.c.in_reply_to,
            MESSAGE.c.text.label("question"),
            FEEDBACK.c.received_at,
        )
        .select_from(
            FEEDBACK.join(
                SUGGESTION,
                sa.and_(
                    SUGGESTION.c.suggestion_id == FEEDBACK.c.suggestion_id,
                    SUGGESTION.c.conversation_id == FEEDBACK.c.conversation_id,
                ),
            ).join(
                MESSAGE,
                sa.and_(
                    MESSAGE.c.conversation_id == SUGGESTION.c.conversation_id,
                    MESSAGE.c.message_id == SUGGESTION.c.in_reply_to,
                ),
            )
        )
        .where(FEEDBACK.c.conversation_id == event.conversation_id, FEEDBACK.c.feedback_id == event.feedback_id)
    )
