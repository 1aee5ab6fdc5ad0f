"""The progress skill: after each event, bring the case's timers, commitments and reading up to date, and say what
that calls for (an escalation when the customer keeps chasing, a handover brief when the case changes hands).

It is consulted under the kind ``progress`` (its admission), and proposes ``escalation`` and ``handover``; the
next step of the procedure is the next-step skill's (vigil/progress/next_step.py), and reminders are the sweep's
(vigil/progress/reminders.py).

What it does per event, in one transaction:
- every event: the SLA timers the case's state calls for are armed, the others cancelled (vigil/progress/sla.py);
- an analyst's message: open commitments it follows up on are ``kept`` (their timers cancelled); the promises it
  makes are stored, each with a timer at its due time and a reminder before it; its first sentence joins what has
  been tried;
- a customer's message: the first states the problem; the customer's mood and chasing are read again, and once an
  analyst has answered, an ``escalation`` is proposed on the message that makes them call for one;
- ``closed``: open commitments are ``cancelled`` with their timers;
- ``escalated``, or ``assigned`` to someone else: a ``handover`` brief (vigil/cases/handover.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases import handover, progress, timers
from vigil.cases.progress import Commitment, Reading
from vigil.cases.states import State
from vigil.cases.tables import MESSAGE
from vigil.cases.timers import Arm
from vigil.core.clock import Clock
from vigil.db.engine import guarded
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.progress import sla
from vigil.progress.commitments import find_promises, follows_up
from vigil.progress.pressure import pressure
from vigil.progress.reminders import COMMITMENT, Reminders
from vigil.progress.settings import ProgressSettings
from vigil.wire.events import CaseEvent, Event, Message

log = logging.getLogger(__name__)

RECENT = 30
"""How many of the conversation's latest messages are read for the customer's messages since the analyst's last."""
TRIED = 8
"""How many of the analysts' steps the brief keeps (the latest)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CHATTER = re.compile(
    r"^(hi|hello|hey|(good )?(morning|afternoon|evening)|thanks|thank you|ok|okay|sure|no problem|you're welcome|bye"
    r"|sorry|welcome)\b",
    re.I,
)


class ProgressSkill:
    """Keeps each case's progress, and proposes escalations and handovers."""

    name = "progress"
    kind = "progress"

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        settings: ProgressSettings,
        clock: Clock,
        reminders: Reminders,
        timeout_s: float | None = None,
    ) -> None:
        """``timeout_s`` bounds each event's transaction; database errors come out as vigil's (an unreachable
        database is ``StoreUnavailable``: the pipeline asks again with back-off)."""
        self._engine = engine
        self._timeout_s = timeout_s
        self._settings = settings
        self._clock = clock
        self._reminders = reminders

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if case is None or not isinstance(event, Message | CaseEvent):
            return []
        now = self._clock.now()
        said: list[Proposal] = []
        moved: str | None = None  # why the case changed hands, if it did
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            stored = await progress.reading(conn, case.conversation_id)
            read = replace(stored) if stored is not None else Reading(case.conversation_id, updated_at=now)
            read.tried = list(read.tried)
            await self._clocks(conn, case)
            if isinstance(event, Message) and event.role == "analyst":
                await self._kept(conn, event, case)
                await self._promised(conn, event, case)
                read.tried[:] = [*read.tried, *_steps(event.text)][-TRIED:]
            elif isinstance(event, Message) and event.role == "customer":
                if read.problem is None:
                    read.problem = _problem(event.text)
                said += await self._pressure(conn, case, read)
            elif isinstance(event, CaseEvent):
                if event.event == "opened" and event.category:
                    read.category = event.category
                if event.event == "closed":
                    await self._cancel_commitments(conn, case, event.id, now)
                reassigned = event.event == "assigned" and read.handled_by not in (None, event.assignee)
                if event.event == "escalated" or reassigned:
                    moved = _moved(event)
                if case.assignee:
                    read.handled_by = case.assignee
            if read != stored:  # most events change nothing here: no write, no write lock
                read.updated_at = now
                await progress.save_reading(conn, read)
            if moved is not None:
                brief = await handover.brief(conn, case.conversation_id, zone=self._settings.zone(case.tenant))
                if brief is not None:
                    said.append(Proposal(kind="handover", text=brief.text, confidence=1.0, why=moved))
        return said

    async def _clocks(self, conn: AsyncConnection, case: CaseState) -> None:
        """Arm the SLA timers the case's state calls for and cancel the others, writing only what differs."""
        plan = sla.plan(case, self._settings)
        running = {t.timer_id: t for t in await timers.running(conn, case.conversation_id) if t.kind in sla.CLOCKS}
        await timers.arm(
            conn, [a for a in plan.arm if a.timer_id not in running or running[a.timer_id].due_at != a.due_at]
        )
        await timers.cancel_ids(conn, [timer_id for timer_id in running if timer_id not in plan.keep])

    async def _kept(self, conn: AsyncConnection, message: Message, case: CaseState) -> None:
        open_ = await progress.commitments(conn, case.conversation_id, status=progress.OPEN)
        kept = [c for c in open_ if c.message_id != message.message_id and follows_up(c.what, message.text)]
        for c in kept:
            await progress.settle(
                conn, case.conversation_id, c.commitment_id, progress.KEPT, at=message.sent_at, by=message.message_id
            )
        await timers.cancel_ids(conn, [_timer_id(c.conversation_id, c.commitment_id) for c in kept])
        if kept:
            self._reminders.settled(progress.KEPT, len(kept))

    async def _promised(self, conn: AsyncConnection, message: Message, case: CaseState) -> None:
        zone = _zone(message) or self._settings.zone(case.tenant)
        promises = find_promises(message.text, sent_at=message.sent_at, zone=zone)
        made = [
            Commitment(
                commitment_id=f"{message.message_id}#{n}",
                conversation_id=case.conversation_id,
                message_id=message.message_id,
                tenant=case.tenant,
                what=p.what,
                made_at=message.sent_at,
                due_at=p.due_at,
            )
            for n, p in enumerate(promises, 1)
        ]
        await progress.add_commitments(conn, made)
        armed = []
        for c in made:
            if c.due_at is None or c.due_at <= c.made_at:
                continue
            lead = min(timedelta(seconds=self._settings.remind_before_s), (c.due_at - c.made_at) / 2)
            armed.append(
                Arm(
                    timer_id=_timer_id(c.conversation_id, c.commitment_id),
                    conversation_id=c.conversation_id,
                    tenant=c.tenant,
                    kind=COMMITMENT,
                    started_at=c.made_at,
                    due_at=c.due_at,
                    warn_at=c.due_at - lead if lead > timedelta(0) else None,
                    ref=c.commitment_id,
                )
            )
        await timers.arm(conn, armed)

    async def _cancel_commitments(self, conn: AsyncConnection, case: CaseState, by: str, at: datetime) -> None:
        open_ = await progress.commitments(conn, case.conversation_id, status=progress.OPEN)
        for c in open_:
            await progress.settle(conn, case.conversation_id, c.commitment_id, progress.CANCELLED, at=at, by=by)
        await timers.cancel(conn, case.conversation_id, kinds=[COMMITMENT])
        if open_:
            self._reminders.settled(progress.CANCELLED, len(open_))

    async def _pressure(self, conn: AsyncConnection, case: CaseState, read: Reading) -> list[Proposal]:
        """Read the customer's mood again; propose escalating on the message that makes it call for one."""
        rows = (
            await conn.execute(
                sa.select(MESSAGE.c.role, MESSAGE.c.text)
                .where(MESSAGE.c.conversation_id == case.conversation_id)
                .order_by(MESSAGE.c.seq.desc())
                .limit(RECENT)
            )
        ).all()
        waiting: list[str] = []  # the customer's messages since the analyst last wrote, oldest first
        for row in rows:
            if row.role == "analyst":
                break
            if row.role == "customer":
                waiting.insert(0, row.text)
        now, before = pressure(waiting), pressure(waiting[:-1])
        read.sentiment, read.chases = now.sentiment, now.chases
        # Before a first answer the first-response clock speaks for the customer; once escalated, it is done.
        if not now.escalate or before.escalate or case.state == State.WAITING_ON_INTERNAL:
            return []
        if case.first_response_at is None:
            return []
        return [
            Proposal(
                kind="escalation",
                text=f"{now.why[:1].upper()}{now.why[1:]}. Consider escalating, or give them a concrete update "
                "and a time.",
                confidence=0.8,
                why="the customer keeps chasing, or is getting angrier",
            )
        ]


def _timer_id(conversation_id: str, commitment_id: str) -> str:
    return f"{conversation_id}/commitment/{commitment_id}"


def _zone(message: Message) -> ZoneInfo | None:
    """The customer's time zone from the message's metadata, if it names a real one."""
    name = (message.metadata or {}).get("timezone")
    if not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _problem(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _steps(text: str) -> list[str]:
    """What an analyst's message did, for the brief: its first sentence that is not chatter."""
    for sentence in _SENTENCE.split(" ".join(text.split())):
        if len(sentence.split()) >= 4 and not _CHATTER.match(sentence):
            return [sentence if len(sentence) <= 160 else sentence[:159] + "…"]
    return []


def _moved(event: CaseEvent) -> str:
    if event.event == "escalated":
        return "the case was escalated"
    return f"the case was reassigned to {event.assignee}"
