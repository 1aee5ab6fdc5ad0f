"""The timers' sweep: every replica, every ``sweep_s``, fires the timers that have come due.

A timer's warning becomes a ``follow_up`` suggestion to the analyst: an SLA target about to pass, a promise about
to fall due. At its due time an SLA timer counts a breach (``vigil_sla_breaches_total``) and a commitment still open
becomes ``missed``, each with a ``follow_up`` saying so; the case is then in breach (vigil/cases/breaches.py) until
what the target measures is met. On a closed case a timer says nothing (its commitment is
cancelled). Each timer is taken by one replica at a time
(vigil/cases/timers.py); a suggestion's id is made from the timer and its stage, so one fired twice after a crash is
the same suggestion.

On a simulated clock (``vigil eval replay``, tests) the job also wakes when the next timer fires, so reminders go
out at their own moment of simulated time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter, Histogram
from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.cases import progress, timers
from vigil.cases.timers import Timer
from vigil.core.clock import Clock
from vigil.db.engine import guarded
from vigil.flow.outlet import Outlet
from vigil.flow.scheduler import Job
from vigil.flow.skills import Proposal
from vigil.progress import sla
from vigil.progress.settings import ProgressSettings

log = logging.getLogger(__name__)

SWEEP = "progress-timers"
BATCH = 500
STALE_NOTICE = timedelta(minutes=15)
"""A target found passed longer ago than this (vigil was down, or the events are old: a backlog, a replay) is counted
and shows in the queue as a breach, but no notice is given: the notice is for the moment it happens."""
AT_ONCE = 4
"""Timers of one claim fired at the same time."""
COMMITMENT = timers.COMMITMENT


class Reminders:
    """Fires due timers for one replica (``owner``)."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        outlet: Outlet,
        clock: Clock,
        settings: ProgressSettings,
        registry: CollectorRegistry,
        owner: str,
        timeout_s: float | None = None,
    ) -> None:
        """``timeout_s`` bounds each transaction; database errors come out as vigil's (logged without a traceback,
        the timers tried again at the next sweep)."""
        self._engine = engine
        self._timeout_s = timeout_s
        self._outlet = outlet
        self._clock = clock
        self._settings = settings
        self._owner = owner
        self._claims = itertools.count(1)
        self._breaches = Counter(
            "vigil_sla_breaches",
            "SLA targets passed before they were met, by clock (first_response, next_response, resolution) and "
            "priority.",
            ["clock", "priority"],
            registry=registry,
        )
        self._reminded = Counter(
            "vigil_timer_warnings",
            "Warnings given before a timer falls due (follow_up suggestions), by kind.",
            ["kind"],
            registry=registry,
        )
        self._commitments = Counter(
            "vigil_commitments_settled",
            "Commitments settled, by how (kept, missed, cancelled).",
            ["status"],
            registry=registry,
        )
        self._lateness = Histogram(
            "vigil_timer_lateness_seconds",
            "How long after its time a timer fired.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 300.0),
            registry=registry,
        )
        for clock_name in sla.CLOCKS:
            self._breaches.labels(clock=clock_name, priority="none")
        for status in (progress.KEPT, progress.MISSED, progress.CANCELLED):
            self._commitments.labels(status)

    def settled(self, status: str, count: int = 1) -> None:
        """Count commitments settled (the skill counts those it keeps or cancels)."""
        self._commitments.labels(status).inc(count)

    def job(self) -> Job:
        """The sweep on the scheduler: in every replica (each timer is claimed), and on a simulated clock also at
        each timer's own moment."""

        async def wakes(after: datetime) -> datetime | None:
            return await timers.next_fire_at(self._engine, after)

        async def run(due: datetime) -> None:
            await self.sweep()

        return Job(name=SWEEP, run=run, every_s=self._settings.sweep_s, coalesce=True, wakes=wakes)

    async def sweep(self) -> int:
        """Fire every timer whose time has come, and a warned one again if its due time has come too; returns how
        many fired. A timer that fails to fire stays held until its lease ends, and is tried again after it."""
        fired = 0
        lease = timedelta(seconds=self._settings.lease_s)
        while True:
            now = self._clock.now()
            # Each claim its own holder: two sweeps of one replica at once (a slow one overtaken) never share timers.
            holder = f"{self._owner}#{next(self._claims)}"
            async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
                batch = await timers.claim_due(conn, now=now, owner=holder, lease=lease, limit=BATCH)
            if not batch:
                return fired
            fired += await self._fire_all(batch, holder)

    async def _fire_all(self, batch: list[Timer], holder: str) -> int:
        """Fire a claim's timers, ``AT_ONCE`` at a time, in their order, then move on those that fired; how many
        moved on. Each firing waits mostly on the database and the broker, so one after the
        other a sweep fell behind timers falling due at ~15 a second (bench/timers.py)."""
        turns = asyncio.Semaphore(AT_ONCE)
        now = self._clock.now()

        async def fire(timer: Timer) -> bool:
            async with turns:
                return await self._fire(timer, now)

        said = await asyncio.gather(*(fire(timer) for timer in batch))
        moved = 0
        for timer, ok in zip(batch, said, strict=True):
            if not ok:
                continue
            # One transaction a timer: one row locked at a time, so never a cycle with an event's re-arming.
            async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
                if await timers.advance(conn, timer, owner=holder, now=now):
                    moved += 1
                    self._lateness.observe(max(0.0, (now - timer.fire_at).total_seconds()))
        return moved

    async def _fire(self, timer: Timer, now: datetime) -> bool:
        """Say what a timer calls for; False if that failed (the timer stays held until its lease ends, then is
        tried again)."""
        try:
            if await self._closed(timer, now):
                return True  # nothing to say on a closed case: the timer is moved on, and is done
            if timer.kind == COMMITMENT:
                await self._commitment(timer, now)
            else:
                await self._sla(timer)
        except Exception:
            log.exception("timer %s could not fire; tried again when its lease ends", timer.timer_id)
            return False
        return True

    async def _closed(self, timer: Timer, now: datetime) -> bool:
        """Whether the timer's case is closed. Its ``closed`` event cancels its timers and open commitments in the
        same transaction (vigil/progress/keeper.py), but a timer armed by hand, or by a version of vigil before that,
        may still run: it says nothing, and its commitment is cancelled, never missed."""
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            if not await progress.closed(conn, timer.conversation_id):
                return False
            if timer.kind == COMMITMENT and timer.ref is not None:
                cancelled = await progress.settle(
                    conn, timer.conversation_id, timer.ref, progress.CANCELLED, at=now, by=timer.timer_id
                )
                if cancelled:
                    self.settled(progress.CANCELLED)
        log.info("timer %s not fired: its case is closed", timer.timer_id)
        return True

    async def _say(self, timer: Timer, text: str, why: str, confidence: float = 0.9) -> None:
        await self._outlet.announce(
            Proposal(kind="follow_up", text=text, confidence=confidence, why=why),
            conversation_id=timer.conversation_id,
            tenant=timer.tenant,
            key=f"{timer.timer_id}/{timer.stage}",
        )

    def _local(self, timer: Timer, moment: datetime) -> str:
        return moment.astimezone(self._settings.zone(timer.tenant)).strftime("%H:%M %Z on %a %d %b")

    async def _sla(self, timer: Timer) -> None:
        label = sla.LABELS.get(timer.kind, timer.kind)
        if timer.stage == timers.WARN and timer.due_at <= self._clock.now():
            return  # come too late to warn (vigil was down, or the event came late): its breach is next
        if timer.stage == timers.WARN:
            minutes = max(1, round((timer.due_at - self._clock.now()).total_seconds() / 60))
            await self._say(
                timer,
                f"{label} is due by {self._local(timer, timer.due_at)} (in about {minutes} min).",
                f"SLA {timer.kind.replace('_', ' ')} target for {timer.priority or 'normal'} priority",
            )
            self._reminded.labels(timer.kind).inc()
        else:
            if self._clock.now() - timer.due_at <= STALE_NOTICE:  # news only when it happens (the queue shows it still)
                await self._say(  # before it is counted: a failure here leaves the timer to fire again
                    timer,
                    f"{label} is overdue: it was due by {self._local(timer, timer.due_at)}.",
                    f"SLA {timer.kind.replace('_', ' ')} target for {timer.priority or 'normal'} priority passed",
                    confidence=0.95,
                )
            self._breaches.labels(clock=timer.kind, priority=(timer.priority or "none").lower()).inc()
            log.info("SLA %s breached on %s", timer.kind, timer.conversation_id)

    async def _commitment(self, timer: Timer, now: datetime) -> None:
        if timer.ref is None:
            return
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            row = await progress.commitment(conn, timer.conversation_id, timer.ref)
        if row is None or row.status != progress.OPEN:
            return  # kept or cancelled while the timer was due: nothing to say
        due = self._local(timer, timer.due_at)
        if timer.stage == timers.WARN and timer.due_at <= now:
            return  # too late to remind: the missed notice is next
        if timer.stage == timers.WARN:
            await self._say(timer, f'Reminder: due by {due}, you promised: "{row.what}".', "an open commitment")
            self._reminded.labels(COMMITMENT).inc()
            return
        await self._say(  # before it is marked: a failure here leaves it open, to be said at the next try
            timer,
            f'Missed: you promised "{row.what}" by {due}. Update the customer now.',
            "a commitment passed its due time unkept",
            confidence=0.95,
        )
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            missed = await progress.settle(
                conn, timer.conversation_id, timer.ref, progress.MISSED, at=now, by=timer.timer_id
            )
        if missed:
            self.settled(progress.MISSED)
