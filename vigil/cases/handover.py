"""The handover brief: what whoever takes a case over needs to know, read from what is stored of it.

The problem (the customer's first words), what has been tried (the actions run or under way, and the analysts'
steps so far: sentences that say something done or to do, not courtesy or sympathy), the promises still
open with their due times, the customer's mood, the next step of the procedure and the SLA clocks running. The
progress capability keeps the reading it is built from up to date (vigil/cases/progress.py); the brief itself is
only read, so the API gives the same brief at any moment that the ``handover`` suggestion gave when the case moved.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases import actions, progress, timers
from vigil.cases.tables import CONVERSATION
from vigil.core.money import amount


class OpenCommitment(BaseModel):
    what: str
    due_at: datetime | None


class RunningClock(BaseModel):
    kind: str
    due_at: datetime


class Mood(BaseModel):
    """The customer's sentiment: ``label`` from ``score`` (-1 to 1), and how often they have chased."""

    label: str
    score: float | None
    chases: int


class NextStep(BaseModel):
    procedure: str
    label: str
    reply: str | None


class Brief(BaseModel):
    """A handover brief, as JSON; ``text`` is the same for a person to read."""

    conversation_id: str
    tenant: str
    state: str
    assignee: str | None
    priority: str | None
    problem: str | None
    tried: list[str]
    open_commitments: list[OpenCommitment]
    sentiment: Mood
    next_step: NextStep | None
    clocks: list[RunningClock]
    text: str


def mood(score: float | None, chases: int) -> str:
    """A word for the customer's mood."""
    if score is None:
        return "unknown"
    if score <= -0.5 or (score < 0 and chases >= 2):
        return "angry"
    if score < -0.1 or chases >= 2:
        return "frustrated"
    if score > 0.3:
        return "positive"
    return "neutral"


async def brief(conn: AsyncConnection, conversation_id: str, *, zone: ZoneInfo | None = None) -> Brief | None:
    """The brief of a conversation, or None if there is none by that id; times in the text are in ``zone``."""
    head = (await conn.execute(sa.select(CONVERSATION).where(CONVERSATION.c.id == conversation_id))).first()
    if head is None:
        return None
    read = await progress.reading(conn, conversation_id)
    open_ = await progress.commitments(conn, conversation_id, status=progress.OPEN)
    running = [t for t in await timers.running(conn, conversation_id) if t.kind != "commitment"]
    score, chases = (read.sentiment, read.chases) if read else (None, 0)
    step = None
    if read is not None and read.procedure and read.next_step:
        step = NextStep(procedure=read.procedure, label=read.next_step, reply=read.next_reply)
    fields = {
        "conversation_id": conversation_id,
        "tenant": head.tenant,
        "state": head.state,
        "assignee": head.assignee,
        "priority": head.priority,
        "problem": read.problem if read else None,
        "tried": [
            *map(_tried, await actions.of_conversation(conn, conversation_id, statuses=_TRIED)),
            *(read.tried if read else []),
        ],
        "open_commitments": [OpenCommitment(what=c.what, due_at=c.due_at) for c in open_],
        "sentiment": Mood(label=mood(score, chases), score=score, chases=chases),
        "next_step": step,
        "clocks": [RunningClock(kind=t.kind, due_at=t.due_at) for t in running],
    }
    return Brief(**fields, text=_text(fields, zone))


_TRIED = {
    "approved": "approved",
    "executing": "running",
    "executed": "done",
    "failed": "failed",
    "in_doubt": "in doubt",
}
"""The statuses of an action that was tried (decided to run), as the brief says them."""


def _tried(action: actions.ActionRecord) -> str:
    """An action tried, for the brief: "Refund order ORD-10005, 62.49: done"."""
    name = action.name.replace("_", " ")
    ids = [str(v) for v in action.arguments.values() if isinstance(v, str) and any(ch.isdigit() for ch in v)][:2]
    money = [amount(action.amount_cents)] if action.amount_cents is not None else []
    said = ", ".join([" ".join([name[:1].upper() + name[1:], *ids]), *money])
    return f"{said}: {_TRIED.get(action.status, action.status)}"


def _when(moment: datetime | None, zone: ZoneInfo | None) -> str:
    if moment is None:
        return "no time given"
    local = moment.astimezone(zone) if zone is not None else moment
    return local.strftime("%a %d %b %H:%M %Z")


def _text(b: dict[str, object], zone: ZoneInfo | None) -> str:
    lines = [f"Handover: case {b['conversation_id']} ({str(b['state']).replace('_', ' ')})"]
    lines.append(f"Problem: {b['problem'] or 'not stated yet'}")
    tried = b["tried"]
    assert isinstance(tried, list)
    lines.append("Tried: " + ("; ".join(tried) if tried else "nothing yet"))
    promised = b["open_commitments"]
    assert isinstance(promised, list)
    if promised:
        lines.append("Open promises: " + "; ".join(f"{c.what} (due {_when(c.due_at, zone)})" for c in promised))
    else:
        lines.append("Open promises: none")
    m = b["sentiment"]
    assert isinstance(m, Mood)
    chased = f", chased {m.chases} times" if m.chases else ""
    lines.append(f"Customer: {m.label}{chased}")
    step = b["next_step"]
    if isinstance(step, NextStep):
        lines.append(f"Next step: {step.label} ({step.procedure})")
    clocks = b["clocks"]
    assert isinstance(clocks, list)
    for c in clocks:
        lines.append(f"SLA {c.kind.replace('_', ' ')} due {_when(c.due_at, zone)}")
    return "\n".join(lines)
