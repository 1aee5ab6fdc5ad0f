"""Jobs on the one clock: every so many seconds, or at a time of day (UTC), each run given its window's due time.

Windows are aligned to the clock, not to when a process started: an interval job is due at every multiple of its
interval since the Unix epoch, an at-time job once a day at its time. So every replica, and every replay of the same
events, agrees on them.

On the ``SystemClock`` APScheduler (3.x, ``AsyncIOScheduler``) wakes the jobs. On any other clock nothing runs by
itself: ``run_due(until)`` moves a ``ManualClock`` to each due time in turn and runs what is due there, which is how
``vigil eval replay`` fires jobs between two events and how tests drive them.

A *durable* job keeps its windows in the database (vigil/flow/claims.py): it runs once per window across replicas,
its run holds a lease that the scheduler renews while it runs, so a replica that dies mid-run loses the window to
another when the lease expires, and a window that came while every replica was down runs once at the next start.
A job that is not durable runs in every process that schedules it (the knowledge refresh: each replica has its own
indexes).

A job that raises is logged and counted; it never stops the scheduler, and its next window runs as usual.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import Enum

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.core.clock import Clock, ManualClock, SystemClock
from vigil.core.errors import VigilError
from vigil.flow import claims

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
KEPT_WINDOWS = 8
"""How many periods of a durable job's windows the database keeps: enough that a late replica never re-runs one."""


@dataclass(frozen=True, slots=True)
class Job:
    """Something to run on the clock: ``run(due)`` every ``every_s`` seconds, or each day ``at`` a time (UTC).

    Args:
        name: unique among the scheduler's jobs; names the job's windows in the database and in the metric.
        run: the coroutine to run, given the due time of the window it runs for.
        every_s: the interval, in seconds.
        at: the time of day, in UTC (a naive time is taken as UTC).
        durable: keep the windows in the database: once per window across replicas, and run after a restart.
        lease_s: how long a durable run holds its window without renewing it (renewed every third of it while it
            runs): how soon another replica takes over from one that died mid-run.
        coalesce: when several windows fall due at once (simulated time jumping ahead, a stalled loop), run only
            the latest: for a job that only catches up on state, such as the knowledge refresh. Otherwise each
            window runs, in order, at its own time.
        wakes: on a simulated clock, when the job is next needed after a moment, besides its windows (the timers'
            sweep: when the next timer fires), or None. ``run_due`` runs it then, with that moment as its due
            time, so that a replay fires a timer at its own time and not only at the job's next window. It must
            answer a moment after the one it is given, or None.
    """

    name: str
    run: Callable[[datetime], Awaitable[None]]
    every_s: float | None = None
    at: time | None = None
    durable: bool = False
    lease_s: float = 600.0
    coalesce: bool = False
    wakes: Callable[[datetime], Awaitable[datetime | None]] | None = None

    def __post_init__(self) -> None:
        if (self.every_s is None) == (self.at is None):
            raise ValueError(f"job {self.name!r} needs either every_s or at, not both")
        if self.every_s is not None and self.every_s <= 0:
            raise ValueError(f"job {self.name!r}: every_s must be positive")
        if self.lease_s <= 0:
            raise ValueError(f"job {self.name!r}: lease_s must be positive")
        if self.wakes is not None and self.durable:
            raise ValueError(f"job {self.name!r}: a durable job runs in its windows only; wakes is for the others")

    @property
    def period(self) -> timedelta:
        """The time between two windows."""
        return DAY if self.every_s is None else timedelta(seconds=self.every_s)

    @property
    def anchor(self) -> datetime:
        """One due time; the others are whole periods away from it."""
        if self.at is None:
            return EPOCH
        at = self.at
        if at.tzinfo is not None:
            at = datetime.combine(EPOCH.date(), at).astimezone(UTC).time()
        return datetime.combine(EPOCH.date(), at, tzinfo=UTC)

    def latest(self, moment: datetime) -> datetime:
        """The due time of the last window at or before ``moment``."""
        return self.anchor + self.period * ((moment - self.anchor) // self.period)

    def next_after(self, moment: datetime) -> datetime:
        """The due time of the first window after ``moment``."""
        return self.latest(moment) + self.period


class Outcome(Enum):
    """What became of a window, as ``vigil_job_runs_total`` counts it."""

    RAN = "ran"
    FAILED = "failed"
    SKIPPED_CLAIMED = "skipped_claimed"


class _Fire(Enum):
    WINDOW = "window"
    """A window reached on schedule; the next one follows it."""
    CATCH_UP = "catch-up"
    """A window missed while every replica was down."""
    RETRY = "retry"
    """A window another replica held, asked again when its lease ends."""
    WAKE = "wake"
    """On a simulated clock: a moment the job asked for (``Job.wakes``), outside its windows."""


@dataclass(order=True, frozen=True, slots=True)
class _Due:
    at: datetime
    seq: int
    job: Job = field(compare=False)
    due: datetime = field(compare=False)
    fire: _Fire = field(compare=False)


def replica_id() -> str:
    """This process's name in claims: host, pid and a random part (two schedulers in one process differ)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler:
    """Runs jobs on ``clock``; durable jobs claim their windows in ``engine``'s ``job_claim`` table."""

    def __init__(
        self,
        jobs: Sequence[Job],
        *,
        clock: Clock,
        registry: CollectorRegistry,
        engine: AsyncEngine | None = None,
        owner: str | None = None,
    ) -> None:
        names = [job.name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"job names must be unique: {names}")
        if engine is None and any(job.durable for job in jobs):
            raise ValueError("durable jobs need a database engine")
        self.jobs = tuple(jobs)
        self.owner = owner or replica_id()
        self._clock = clock
        self._engine = engine
        self._runs = Counter(
            "vigil_job_runs",
            "Scheduled job windows, by job and outcome (ran, failed, skipped_claimed: another replica has it).",
            ["job", "outcome"],
            registry=registry,
        )
        self._last_ran = Gauge(
            "vigil_job_last_success_timestamp_seconds",
            "When this replica last ran a window of the job to its end (Unix time; 0: not yet). Across replicas the "
            "latest is max by (job): a window runs on one replica only.",
            ["job"],
            registry=registry,
        )
        for job in self.jobs:  # every series from the start, at zero, so a rate over it is defined
            for outcome in Outcome:
                self._runs.labels(job=job.name, outcome=outcome.value)
            self._last_ran.labels(job=job.name)
        self._queue: list[_Due] = []
        self._seq = 0
        self._aps: AsyncIOScheduler | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._started = False

    async def start(self) -> None:
        """Schedule every job from the clock's now; queue the durable windows missed while vigil was down.

        Safe to call again after it raised (the database was unreachable): nothing is scheduled until it returns.
        """
        if self._started:
            return
        now = self._clock.now()
        catch_ups: list[tuple[Job, datetime]] = []
        for job in self.jobs:
            if job.durable:
                missed = await claims.missed(self._db, job.name, now)
                if missed is not None:
                    catch_ups.append((job, job.latest(now)))
                await claims.expect(self._db, job.name, job.next_after(now))
        if isinstance(self._clock, SystemClock):
            self._aps = AsyncIOScheduler(timezone=UTC)
            for job in self.jobs:
                trigger = IntervalTrigger(seconds=job.period.total_seconds(), start_date=job.anchor, timezone=UTC)
                self._aps.add_job(
                    self._tick, trigger, args=[job], coalesce=True, max_instances=1, misfire_grace_time=None
                )
            self._aps.start()
        else:
            for job in self.jobs:
                self._push(job.next_after(now), job, job.next_after(now), _Fire.WINDOW)
        self._started = True
        for job, due in catch_ups:
            log.info("job %s missed its window at %s; running it once now", job.name, due.isoformat())
            self._later(now, job, due, _Fire.CATCH_UP)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop waking jobs; give the runs in progress ``grace_s`` to finish, then cancel them (a cancelled durable
        run's window passes on when its lease ends)."""
        if self._aps is not None:
            self._aps.pause()  # no new wake-ups; shutting it down would cancel the runs in progress at once
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace_s)
        if self._aps is not None:
            self._aps.shutdown(wait=False)
            self._aps = None
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._queue.clear()
        self._started = False

    async def run_due(self, until: datetime) -> None:
        """On a ``ManualClock``: run every job due up to ``until`` (inclusive), in due-time order, each with the
        clock set to its time; then leave the clock at ``until``."""
        clock = self._clock
        if not isinstance(clock, ManualClock):
            raise TypeError("run_due drives a ManualClock; on the SystemClock jobs run by themselves")
        while True:
            woken = await self._woken(until)
            if woken is not None and (not self._queue or woken[0] < self._queue[0].at):
                at, job = woken
                clock.advance_to(at)
                await self._fire(job, at, _Fire.WAKE)
                continue
            if not self._queue or self._queue[0].at > until:
                break
            item = heapq.heappop(self._queue)
            if item.fire is _Fire.WINDOW and item.job.coalesce and item.job.latest(until) > item.due:
                latest = item.job.latest(until)  # the windows in between collapse into this one, in its turn
                self._push(latest, item.job, latest, _Fire.WINDOW)
                continue
            clock.advance_to(item.at)
            if item.fire is _Fire.WINDOW:
                following = item.job.next_after(item.due)
                self._push(following, item.job, following, _Fire.WINDOW)
            await self._fire(item.job, item.due, item.fire)
        clock.advance_to(until)

    async def _woken(self, until: datetime) -> tuple[datetime, Job] | None:
        """The first moment up to ``until`` at which a job with ``wakes`` asks to run, and that job."""
        first: tuple[datetime, Job] | None = None
        now = self._clock.now()
        for job in self.jobs:
            if job.wakes is None:
                continue
            at = await job.wakes(now)
            if at is not None and now < at <= until and (first is None or at < first[0]):
                first = (at, job)
        return first

    @property
    def _db(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("a durable job without a database")
        return self._engine

    def _push(self, at: datetime, job: Job, due: datetime, fire: _Fire) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Due(at, self._seq, job, due, fire))

    def _later(self, at: datetime, job: Job, due: datetime, fire: _Fire) -> None:
        """Fire one window (a catch-up or a retry) at ``at``, outside the job's regular chain."""
        if not self._started:
            return
        if self._aps is not None:
            trigger = DateTrigger(run_date=at, timezone=UTC)
            self._aps.add_job(self._fire, trigger, args=[job, due, fire], misfire_grace_time=None)
        else:
            self._push(at, job, due, fire)

    async def _tick(self, job: Job) -> None:
        """APScheduler's entry: the window is the latest one due (APScheduler wakes a job at or after its time)."""
        await self._fire(job, job.latest(self._clock.now()), _Fire.WINDOW)

    async def _fire(self, job: Job, due: datetime, fire: _Fire) -> None:
        # APScheduler runs each job in a task of its own, which stop() cancels; run_due runs them in its caller's.
        task = asyncio.current_task() if self._aps is not None else None
        if task is not None:
            self._running.add(task)
        try:
            outcome = await self._window(job, due, fire)
        except Exception:
            log.exception("job %s could not run its window at %s", job.name, due.isoformat())
            outcome = Outcome.FAILED
        finally:
            if task is not None:
                self._running.discard(task)
        if outcome is not None:
            self._runs.labels(job=job.name, outcome=outcome.value).inc()
        if outcome is Outcome.RAN:
            self._last_ran.labels(job=job.name).set(self._clock.now().timestamp())

    async def _window(self, job: Job, due: datetime, fire: _Fire) -> Outcome | None:
        """Run one window; None when there is nothing to count (a retry finding the window done)."""
        if not job.durable:
            return await self._run(job, due)
        if fire is _Fire.WINDOW:
            await claims.expect(self._db, job.name, job.next_after(due))
        now = self._clock.now()
        claim = await claims.claim(
            self._db, job.name, due, owner=self.owner, now=now, lease=timedelta(seconds=job.lease_s)
        )
        if not claim.won:
            if claim.held_until is not None:
                self._later(claim.held_until, job, due, _Fire.RETRY)
            return None if fire is _Fire.RETRY else Outcome.SKIPPED_CLAIMED
        renewing = asyncio.create_task(
            self._renew(job, due, self._clock.monotonic()), name=f"vigil-job-lease-{job.name}"
        )
        try:
            outcome = await self._run(job, due)
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        kept = await claims.finish(
            self._db,
            job.name,
            due,
            owner=self.owner,
            outcome=outcome.value,
            now=self._clock.now(),
            keep_from=due - job.period * KEPT_WINDOWS,
        )
        if not kept:
            log.warning("job %s lost its window at %s to another replica before it finished", job.name, due.isoformat())
        return outcome

    async def _renew(self, job: Job, due: datetime, since: float) -> None:
        """While a durable run goes on, extend its lease every third of it: only a replica that stopped loses it."""
        lease = timedelta(seconds=job.lease_s)
        for beat in itertools.count(1):
            await self._clock.sleep(since + beat * job.lease_s / 3 - self._clock.monotonic())
            try:
                held = await claims.renew(self._db, job.name, due, owner=self.owner, now=self._clock.now(), lease=lease)
            except Exception:
                log.warning("could not renew the lease of job %s; will retry", job.name, exc_info=True)
                continue
            if not held:
                log.warning("job %s lost its window at %s to another replica", job.name, due.isoformat())
                return

    async def _run(self, job: Job, due: datetime) -> Outcome:
        try:
            await job.run(due)
        except VigilError as exc:  # a failure vigil knows (a store unavailable, ...): its own words say enough
            log.warning("job %s failed for its window at %s: %s", job.name, due.isoformat(), exc)
            return Outcome.FAILED
        except Exception:
            log.exception("job %s failed for its window at %s", job.name, due.isoformat())
            return Outcome.FAILED
        return Outcome.RAN
