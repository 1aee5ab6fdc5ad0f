"""The progress keeper: what each message and case event means for the case's progress, written in the event's own
group-committed transaction (vigil/flow/keeping.py), so that it is committed with the event or not at all.

Per event:
- every event: the SLA timers the case's state calls for are armed, the others cancelled (vigil/progress/sla.py);
- an analyst's message: open commitments it follows up on are ``kept`` (their timers cancelled); the promises it
  makes are stored, each with a timer at its due time and a reminder before it; while a promise with a due time is
  open after it, the case is the analyst's to move (``promised``: waiting on the analyst); its first sentence joins
  what has been tried;
- a customer's message: the first states the problem; the customer's mood and chasing are read again;
- ``closed``: open commitments are ``cancelled``, and every timer of the case with them;
- a case event: who handles the case, and its category when it opens.

A crash can no longer fall between the event's commit and these writes, and a redelivered event is not new, so
nothing here is done twice. The whole batch is read with a few statements (the readings, the running timers, the
open commitments, the customer's latest messages of every case in it) and written with a few more; events of one
conversation come one per batch but for a batch recorded one event at a time, which is taken in waves (each
conversation once per wave). What is worth saying (an escalation, a handover brief) the progress skill proposes
after the commit (vigil/progress/skill.py); the customer's pressure it finds here is left for it in memory.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases import progress, timers
from vigil.cases.progress import Commitment, Reading, Settle
from vigil.cases.timers import Arm, Running
from vigil.core.clock import Clock
from vigil.flow.case import CaseState
from vigil.flow.keeping import Kept
from vigil.progress import sla
from vigil.progress.commitments import find_promises, follows_up
from vigil.progress.pressure import Pressure, pressure
from vigil.progress.reminders import COMMITMENT, Reminders
from vigil.progress.settings import ProgressSettings, Targets
from vigil.wire.events import CaseEvent, Message

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
_SYMPATHY = re.compile(
    r"^\W*(i'?m|i am|we'?re|we are) (so |really |very |truly )?sorry\b|\bapologi[sz]e\b|^\W*i (completely |totally )?"
    r"understand\b|^\W*that (sounds|must be)\b",
    re.I,
)
_DOING = re.compile(
    r"\b(i'?ve|i have|we'?ve|we have|i'?ll|i will|we'?ll|we will|i just|i went ahead|i'?m going to|i am going to|"
    r"i can see|i checked|i'?m (checking|booking|sending|raising|arranging|resetting)|we'?re (sending|arranging))\b|"
    r"^\W*(please |just |now |then |first,? )?(restart|reboot|reset|unplug|plug|try|check|go to|open|tap|click|"
    r"press|turn|switch|hold|wait|enter|type|select|update|reinstall|install|remove|log (in|out)|sign (in|out))\b",
    re.I,
)
"""A sentence that reports something done, under way or promised, or tells the customer a step to take."""
PRESSED_KEPT = 4096
"""How many customer messages' pressure waits for the skill at most (it takes each right after the commit)."""


@dataclass(frozen=True, slots=True)
class Pressed:
    """The customer's pressure with their latest message and without it."""

    now: Pressure
    before: Pressure


def pressed(waiting: Sequence[str]) -> Pressed:
    """The pressure of the customer's messages since the analyst's last reply (oldest first), and before the last."""
    return Pressed(pressure(waiting), pressure(waiting[:-1]))


@dataclass(slots=True)
class _Writes:
    """What a wave of events writes, gathered to be written with one statement each."""

    arm: list[Arm] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    settle: list[Settle] = field(default_factory=list)
    made: list[Commitment] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    owed: list[tuple[str, datetime]] = field(default_factory=list)
    """Cases left with a timed promise open by an analyst's message, and when."""
    kept: int = 0
    cancelled: int = 0


@dataclass(frozen=True, slots=True)
class _Stored:
    """What a wave's conversations hold before its events."""

    readings: dict[str, Reading]
    running: dict[str, list[Running]]
    open_: dict[str, list[Commitment]]
    waiting: dict[str, list[str]]


class ProgressKeeper:
    """Keeps each case's timers, commitments and reading with the events that change them."""

    name = "progress"

    def __init__(self, *, settings: ProgressSettings, clock: Clock, reminders: Reminders) -> None:
        self._settings = settings
        self._clock = clock
        self._reminders = reminders
        self._pressed: OrderedDict[tuple[str, str], Pressed] = OrderedDict()
        self._targets: dict[tuple[str, str | None], Targets] = {}  # per tenant and priority, worked out once

    def take_pressed(self, conversation_id: str, message_id: str) -> Pressed | None:
        """The pressure found with this customer message, if it was kept by this process and not taken yet."""
        return self._pressed.pop((conversation_id, message_id), None)

    async def keep_batch(self, conn: AsyncConnection, kept: Sequence[Kept]) -> None:
        ours = [k for k in kept if k.case is not None and isinstance(k.event, Message | CaseEvent)]
        for wave in _waves(ours):
            await self._keep_wave(conn, wave)

    async def _keep_wave(self, conn: AsyncConnection, wave: list[Kept]) -> None:
        stored = await self._read(conn, wave)
        writes = _Writes()
        now = self._clock.now()
        for one in wave:
            assert one.case is not None and isinstance(one.event, Message | CaseEvent)  # _waves keeps only these
            self._keep(one.event, one.case, stored, writes, now)
        await timers.arm(conn, writes.arm)
        await timers.cancel_ids(conn, writes.cancel)
        await timers.cancel_in(conn, writes.closed)
        await progress.settle_all(conn, writes.settle)
        await progress.add_commitments(conn, writes.made)
        await progress.promised(conn, writes.owed)
        await progress.save_readings(conn, writes.readings)
        if writes.kept:
            self._reminders.settled(progress.KEPT, writes.kept)
        if writes.cancelled:
            self._reminders.settled(progress.CANCELLED, writes.cancelled)

    async def _read(self, conn: AsyncConnection, wave: list[Kept]) -> _Stored:
        ids = [one.event.conversation_id for one in wave]
        analysts_or_closed = [
            one.event.conversation_id
            for one in wave
            if (isinstance(one.event, Message) and one.event.role == "analyst")
            or (isinstance(one.event, CaseEvent) and one.event.event == "closed")
        ]
        customers = [
            one.event.conversation_id for one in wave if isinstance(one.event, Message) and one.event.role == "customer"
        ]
        return _Stored(
            readings=await progress.readings(conn, ids),
            running=await timers.running_in(conn, ids),
            open_=await progress.open_commitments(conn, analysts_or_closed),
            waiting=await progress.waiting(conn, customers, recent=RECENT),
        )

    def _keep(
        self, event: Message | CaseEvent, case: CaseState, stored: _Stored, writes: _Writes, now: datetime
    ) -> None:
        conversation_id = case.conversation_id
        before = stored.readings.get(conversation_id)
        read = replace(before, tried=list(before.tried)) if before else Reading(conversation_id, updated_at=now)
        self._clocks(case, stored.running.get(conversation_id, []), writes)
        open_ = stored.open_.get(conversation_id, [])
        if isinstance(event, Message) and event.role == "analyst":
            kept = self._kept(event, open_, writes)
            made = self._promised(event, case, writes)
            if any(c.due_at is not None for c in [*(c for c in open_ if c not in kept), *made]):
                writes.owed.append((conversation_id, event.sent_at))  # the analyst owes the next move
            read.tried = [*read.tried, *_steps(event.text)][-TRIED:]
        elif isinstance(event, Message) and event.role == "customer":
            if read.problem is None:
                read.problem = _problem(event.text)
            found = pressed(stored.waiting.get(conversation_id, []))
            read.sentiment, read.chases = found.now.sentiment, found.now.chases
            self._leave(conversation_id, event.message_id, found)
        elif isinstance(event, CaseEvent):
            if event.event == "opened" and event.category:
                read.category = event.category
            if event.event == "closed":
                writes.settle += [
                    Settle(conversation_id, c.commitment_id, progress.CANCELLED, now, event.id) for c in open_
                ]
                writes.cancelled += len(open_)
                writes.closed.append(conversation_id)
            if case.assignee:
                read.handled_by = case.assignee
        if read != before:  # most events change nothing here: no write
            read.updated_at = now
            writes.readings.append(read)

    def _leave(self, conversation_id: str, message_id: str, found: Pressed) -> None:
        self._pressed[(conversation_id, message_id)] = found
        while len(self._pressed) > PRESSED_KEPT:
            self._pressed.popitem(last=False)

    def _clocks(self, case: CaseState, running: list[Running], writes: _Writes) -> None:
        """Arm the SLA timers the case's state calls for and cancel the others, writing only what differs."""
        key = (case.tenant, case.priority)
        targets = self._targets.get(key)
        if targets is None:
            targets = self._targets[key] = self._settings.targets(case.tenant, case.priority)
        plan = sla.plan(case, self._settings, targets)
        clocks = {t.timer_id: t for t in running if t.kind in sla.CLOCKS}
        writes.arm += [a for a in plan.arm if a.timer_id not in clocks or clocks[a.timer_id].due_at != a.due_at]
        writes.cancel += [timer_id for timer_id in clocks if timer_id not in plan.keep]

    def _kept(self, message: Message, open_: list[Commitment], writes: _Writes) -> list[Commitment]:
        kept = [c for c in open_ if c.message_id != message.message_id and follows_up(c.what, message.text)]
        writes.settle += [
            Settle(c.conversation_id, c.commitment_id, progress.KEPT, message.sent_at, message.message_id) for c in kept
        ]
        writes.cancel += [commitment_timer(c.conversation_id, c.commitment_id) for c in kept]
        writes.kept += len(kept)
        return kept

    def _promised(self, message: Message, case: CaseState, writes: _Writes) -> list[Commitment]:
        """The promises ``message`` makes, stored, each timed one with its timer; those with a due time to come."""
        zone = _zone(message) or self._settings.zone(case.tenant)
        timed: list[Commitment] = []
        calendar = self._settings.calendar(case.tenant)
        for n, promise in enumerate(
            find_promises(message.text, sent_at=message.sent_at, zone=zone, calendar=calendar), 1
        ):
            c = Commitment(
                commitment_id=f"{message.message_id}#{n}",
                conversation_id=case.conversation_id,
                message_id=message.message_id,
                tenant=case.tenant,
                what=promise.what,
                made_at=message.sent_at,
                due_at=promise.due_at,
            )
            writes.made.append(c)
            if c.due_at is None or c.due_at <= c.made_at:
                continue
            timed.append(c)
            lead = min(timedelta(seconds=self._settings.remind_before_s), (c.due_at - c.made_at) / 2)
            writes.arm.append(
                Arm(
                    timer_id=commitment_timer(c.conversation_id, c.commitment_id),
                    conversation_id=c.conversation_id,
                    tenant=c.tenant,
                    kind=COMMITMENT,
                    started_at=c.made_at,
                    due_at=c.due_at,
                    warn_at=c.due_at - lead if lead > timedelta(0) else None,
                    ref=c.commitment_id,
                )
            )
        return timed


def commitment_timer(conversation_id: str, commitment_id: str) -> str:
    """The id of a commitment's timer."""
    return f"{conversation_id}/commitment/{commitment_id}"


def _waves(kept: list[Kept]) -> Iterator[list[Kept]]:
    """The events in waves where each conversation comes once, in order (one wave unless the batch repeats one)."""
    left = kept
    while left:
        seen: set[str] = set()
        wave: list[Kept] = []
        later: list[Kept] = []
        for one in left:
            (later if one.event.conversation_id in seen else wave).append(one)
            seen.add(one.event.conversation_id)
        yield wave
        left = later


def _problem(text: str, limit: int = 300) -> str:
    text = " ".join(text[: limit * 4].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _steps(text: str) -> list[str]:
    """What an analyst's message did, for the brief: its first sentence that says something done or to do ("I've
    reset the line", "please restart the hub"), not courtesy, sympathy or a question."""
    for sentence in _SENTENCE.split(" ".join(text.split())):
        if (
            len(sentence.split()) >= 4
            and not _CHATTER.match(sentence)
            and not _SYMPATHY.search(sentence)
            and not sentence.endswith("?")
            and _DOING.search(sentence)
        ):
            return [sentence if len(sentence) <= 160 else sentence[:159] + "…"]
    return []


def _zone(message: Message) -> ZoneInfo | None:
    """The customer's time zone from the message's metadata, if it names a real one."""
    name = (message.metadata or {}).get("timezone")
    if not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
