"""Analysts' edits as answers for a lead's review: an answer an analyst edited before sending says what the customer
should have been told, in the analyst's words.

Each ``edited`` verdict (kept by the answers with the question it answered, ``vigil.knowledge.verdicts``) becomes an
FAQ of its tenant, waiting for review: the customer's question as its question, the reply as sent as its answer, both
redacted as mined entries are. Its provenance names the conversation, the message answered, the suggestion edited,
the feedback and who edited it, and, as the entry it disagrees with, the one the answer was drawn from: the review
page shows the two side by side. Approved, it is served like any FAQ of the tenant; retired, it stays retired (a
candidate is written once, never again over a lead's decision).

The miner proposes them in its run, under its lease, from ``OVERLAP`` before its ``edits`` mark (as it reads
feedback, ``vigil.mining.feedback``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import MESSAGE
from vigil.db.engine import upsert
from vigil.knowledge.documents import Entry
from vigil.knowledge.store import EDITED, Governance
from vigil.knowledge.tables import ENTRY, VERDICT
from vigil.mining import candidates
from vigil.mining.feedback import OVERLAP
from vigil.mining.tables import MINER_MARK

MARK = "edits"
ORIGIN = EDITED
"""The ``origin`` of an entry proposed from an edit (not the miner's: it has no cases for the miner to merge)."""


@dataclass(frozen=True, slots=True)
class Edit:
    """An analyst's edit of an answer, as the verdict keeps it."""

    conversation_id: str
    feedback_id: str
    tenant: str
    entry_id: str
    """The entry the answer was drawn from."""
    question: str
    text: str
    message_id: str
    suggestion_id: str
    by: str | None
    received_at: datetime
    names: tuple[str, ...] = ()
    """The people the conversation names (its customer's author name, the analyst): redacted from both texts."""


@dataclass(slots=True)
class Edits:
    """The edits read since the mark, and the next mark."""

    found: list[Edit] = field(default_factory=list)
    mark: datetime | None = None
    until: datetime | None = None

    @property
    def moved(self) -> bool:
        """Whether the mark moves: something was read since it."""
        return self.until != self.mark


async def since_mark(conn: AsyncConnection, *, limit: int = 5_000) -> Edits:
    """Up to ``limit`` edits received after ``OVERLAP`` before the ``edits`` mark, oldest first, that have no
    candidate entry yet."""
    mark = await conn.scalar(sa.select(MINER_MARK.c.at).where(MINER_MARK.c.name == MARK))
    query = (
        sa.select(
            VERDICT.c.conversation_id,
            VERDICT.c.feedback_id,
            VERDICT.c.tenant,
            VERDICT.c.entry_id,
            VERDICT.c.question,
            VERDICT.c.text,
            VERDICT.c.message_id,
            VERDICT.c.suggestion_id,
            VERDICT.c.by,
            VERDICT.c.received_at,
            MESSAGE.c.author,
        )
        .select_from(
            VERDICT.outerjoin(
                MESSAGE,
                sa.and_(
                    MESSAGE.c.conversation_id == VERDICT.c.conversation_id,
                    MESSAGE.c.message_id == VERDICT.c.message_id,
                ),
            )
        )
        .where(VERDICT.c.verdict == "edited", VERDICT.c.text.is_not(None))
        .order_by(VERDICT.c.received_at)
        .limit(limit)
    )
    if mark is not None:
        query = query.where(VERDICT.c.received_at > mark - OVERLAP)
    rows = (await conn.execute(query)).all()
    found = Edits(mark=mark, until=mark)
    edits = [_edit(row) for row in rows]
    for edit in edits:
        found.until = edit.received_at if found.until is None else max(found.until, edit.received_at)
    ids = [entry_id(e) for e in edits]
    proposed = set((await conn.execute(sa.select(ENTRY.c.id).where(ENTRY.c.id.in_(ids)))).scalars()) if ids else set()
    found.found = [e for e in edits if entry_id(e) not in proposed and e.text.strip()]
    return found


def _edit(row: Any) -> Edit:
    return Edit(
        conversation_id=row.conversation_id,
        feedback_id=row.feedback_id,
        tenant=row.tenant,
        entry_id=row.entry_id,
        question=row.question,
        text=row.text,
        message_id=row.message_id,
        suggestion_id=row.suggestion_id,
        by=row.by,
        received_at=row.received_at,
        names=tuple(n for n in (row.author, row.by) if n),
    )


def entry_id(edit: Edit) -> str:
    """The id of the candidate an edit makes: stable, the same on every run."""
    key = f"{edit.tenant}\0{edit.conversation_id}\0{edit.feedback_id}"
    return f"edit-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def candidate(edit: Edit, redact: Callable[[str, Iterable[str]], str]) -> tuple[Entry, Governance]:
    """The FAQ an edit proposes, waiting for review, with where it came from; ``redact(text, names)`` takes out
    what identifies people."""
    return candidates.proposed(
        entry_id=entry_id(edit),
        origin=ORIGIN,
        tenant=edit.tenant,
        conversation_id=edit.conversation_id,
        question=redact(edit.question, edit.names),
        answer=redact(edit.text, edit.names),
        disagrees_with=[edit.entry_id],
        source={
            "of": edit.entry_id,
            "conversation_id": edit.conversation_id,
            "message_id": edit.message_id,
            "suggestion_id": edit.suggestion_id,
            "feedback_id": edit.feedback_id,
            "by": edit.by,
            "received_at": edit.received_at.isoformat(),
        },
    )


async def mark_read(conn: AsyncConnection, edits: Edits) -> None:
    """In the miner's transaction: move the ``edits`` mark past what was read."""
    if not edits.moved or edits.until is None:
        return
    stmt = upsert(conn, MINER_MARK)
    await conn.execute(
        stmt.on_conflict_do_update(index_elements=[MINER_MARK.c.name], set_={"at": stmt.excluded.at}),
        {"name": MARK, "at": edits.until},
    )
