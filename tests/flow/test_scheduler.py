"""The scheduler: windows on the clock, fired at simulated times by run_due, and by APScheduler on the system clock;
durable jobs once per window across replicas and after a restart, on both databases."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, timezone

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from tests.conftest import wait_for
from vigil.cases.store import CaseStore
from vigil.core.clock import Clock, ManualClock, SystemClock
from vigil.flow.scheduler import Job, Scheduler
from vigil.flow.tables import JOB_CLAIM

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@dataclass
class Recorder:
    """A job's body that remembers each run: the window's due time and the clock's time when it ran."""

    clock: Clock
    runs: list[tuple[datetime, datetime]] = field(default_factory=list)
    failing: set[datetime] = field(default_factory=set)

    async def __call__(self, due: datetime) -> None:
        self.runs.append((due, self.clock.now()))
        if due in self.failing:
            raise RuntimeError("the job broke")

    @property
    def dues(self) -> list[datetime]:
        return [due for due, _ in self.runs]


def counted(registry: CollectorRegistry, job: str, outcome: str) -> float:
    return registry.get_sample_value("vigil_job_runs_total", {"job": job, "outcome": outcome}) or 0.0


async def started(jobs: list[Job], clock: Clock, store: CaseStore | None = None) -> tuple[Scheduler, CollectorRegistry]:
    registry = CollectorRegistry()
    engine = store.engine if store is not None else None
    scheduler = Scheduler(jobs, clock=clock, registry=registry, engine=engine)
    await scheduler.start()
    return scheduler, registry


# --- On a simulated clock ---


async def test_an_interval_job_runs_at_each_of_its_windows_with_the_clock_set_to_it():
    clock = ManualClock(T0)
    body = Recorder(clock)
    scheduler, registry = await started([Job(name="sweep", run=body, every_s=600)], clock)
    await scheduler.run_due(T0 + timedelta(seconds=1300))
    at_600, at_1200 = T0 + timedelta(seconds=600), T0 + timedelta(seconds=1200)
    assert body.runs == [(at_600, at_600), (at_1200, at_1200)]
    assert clock.now() == T0 + timedelta(seconds=1300)
    assert counted(registry, "sweep", "ran") == 2
    assert registry.get_sample_value("vigil_job_runs_total", {"job": "sweep", "outcome": "failed"}) == 0


async def test_run_due_runs_a_window_due_exactly_at_until_and_nothing_before_it_is_due():
    clock = ManualClock(T0)
    body = Recorder(clock)
    scheduler, _ = await started([Job(name="sweep", run=body, every_s=600)], clock)
    await scheduler.run_due(T0 + timedelta(seconds=599))
    assert body.runs == []
    await scheduler.run_due(T0 + timedelta(seconds=600))
    assert body.dues == [T0 + timedelta(seconds=600)]


async def test_jobs_run_in_due_time_order_each_at_its_own_simulated_time():
    clock = ManualClock(T0)
    order: list[tuple[str, datetime]] = []

    def body(name: str):  # type: ignore[no-untyped-def]
        async def run(due: datetime) -> None:
            order.append((name, clock.now()))

        return run

    jobs = [
        Job(name="slow", run=body("slow"), every_s=900),
        Job(name="daily", run=body("daily"), at=time(9, 20)),
        Job(name="fast", run=body("fast"), every_s=600),
    ]
    scheduler, _ = await started(jobs, clock)
    await scheduler.run_due(T0 + timedelta(minutes=30))
    minute = timedelta(minutes=1)
    # At one time, in the order they were scheduled.
    assert order == [
        ("fast", T0 + 10 * minute),
        ("slow", T0 + 15 * minute),
        ("daily", T0 + 20 * minute),
        ("fast", T0 + 20 * minute),
        ("slow", T0 + 30 * minute),
        ("fast", T0 + 30 * minute),
    ]


async def test_windows_are_aligned_to_the_clock_not_to_when_the_scheduler_started():
    clock = ManualClock(T0 + timedelta(seconds=137))
    body = Recorder(clock)
    scheduler, _ = await started([Job(name="sweep", run=body, every_s=600)], clock)
    await scheduler.run_due(T0 + timedelta(seconds=1300))
    assert body.dues == [T0 + timedelta(seconds=600), T0 + timedelta(seconds=1200)]


async def test_an_at_time_job_runs_once_a_day_at_its_time_of_day_in_utc():
    clock = ManualClock(T0)
    body = Recorder(clock)
    paris = timezone(timedelta(hours=1))
    scheduler, _ = await started([Job(name="report", run=body, at=time(4, 30, tzinfo=paris))], clock)
    await scheduler.run_due(T0 + timedelta(days=2))
    assert body.dues == [datetime(2026, 11, 3, 3, 30, tzinfo=UTC), datetime(2026, 11, 4, 3, 30, tzinfo=UTC)]


async def test_a_failing_job_is_logged_and_counted_and_its_next_window_still_runs(caplog: pytest.LogCaptureFixture):
    clock = ManualClock(T0)
    body = Recorder(clock, failing={T0 + timedelta(seconds=600)})
    scheduler, registry = await started([Job(name="sweep", run=body, every_s=600)], clock)
    await scheduler.run_due(T0 + timedelta(seconds=1200))
    assert body.dues == [T0 + timedelta(seconds=600), T0 + timedelta(seconds=1200)]
    assert (counted(registry, "sweep", "failed"), counted(registry, "sweep", "ran")) == (1, 1)
    assert any(r.exc_info and "sweep failed" in r.getMessage() for r in caplog.records)


async def test_the_last_success_of_a_job_is_when_a_window_last_ran_to_its_end_not_when_one_failed():
    clock = ManualClock(T0)
    body = Recorder(clock, failing={T0 + timedelta(seconds=1200)})
    scheduler, registry = await started([Job(name="miner", run=body, every_s=600)], clock)
    last = {"job": "miner"}
    assert registry.get_sample_value("vigil_job_last_success_timestamp_seconds", last) == 0
    await scheduler.run_due(T0 + timedelta(seconds=1200))  # 600 ran, 1200 failed
    success = registry.get_sample_value("vigil_job_last_success_timestamp_seconds", last)
    assert success == (T0 + timedelta(seconds=600)).timestamp()


async def test_a_job_needs_an_interval_or_a_time_of_day_and_durable_jobs_need_a_database():
    async def nothing(due: datetime) -> None:
        return None

    with pytest.raises(ValueError, match="either every_s or at"):
        Job(name="x", run=nothing)
    with pytest.raises(ValueError, match="either every_s or at"):
        Job(name="x", run=nothing, every_s=60, at=time(3))
    with pytest.raises(ValueError, match="positive"):
        Job(name="x", run=nothing, every_s=0)
    with pytest.raises(ValueError, match="database"):
        Scheduler(
            [Job(name="x", run=nothing, every_s=60, durable=True)], clock=SystemClock(), registry=CollectorRegistry()
        )
    with pytest.raises(ValueError, match="unique"):
        Scheduler(
            [Job(name="x", run=nothing, every_s=60), Job(name="x", run=nothing, every_s=30)],
            clock=SystemClock(),
            registry=CollectorRegistry(),
        )


async def test_run_due_is_for_a_manual_clock():
    scheduler = Scheduler([], clock=SystemClock(), registry=CollectorRegistry())
    with pytest.raises(TypeError, match="ManualClock"):
        await scheduler.run_due(T0)


# --- Durable jobs, on both databases ---


async def test_two_schedulers_sharing_a_database_run_each_window_once(store: CaseStore):
    clock = ManualClock(T0)
    first, second = Recorder(clock), Recorder(clock)
    a, a_registry = await started([Job(name="miner", run=first, every_s=600, durable=True)], clock, store)
    b, b_registry = await started([Job(name="miner", run=second, every_s=600, durable=True)], clock, store)
    for n in (1, 2, 3):
        until = T0 + timedelta(seconds=600 * n)
        # Each window, a different replica gets there first.
        for scheduler in (a, b) if n % 2 else (b, a):
            await scheduler.run_due(until)
    assert sorted(first.dues + second.dues) == [T0 + timedelta(seconds=600 * n) for n in (1, 2, 3)]
    assert (first.dues, second.dues) == (
        [T0 + timedelta(seconds=600 * n) for n in (1, 3)],
        [T0 + timedelta(seconds=1200)],
    )
    assert (counted(a_registry, "miner", "ran"), counted(a_registry, "miner", "skipped_claimed")) == (2, 1)
    assert (counted(b_registry, "miner", "ran"), counted(b_registry, "miner", "skipped_claimed")) == (1, 2)
    # The lease of a window another replica finished ends without a second run.
    await b.run_due(T0 + timedelta(hours=2))
    assert len(first.dues + second.dues) == 12 and len(set(first.dues + second.dues)) == 12


async def test_when_a_replica_dies_mid_run_another_takes_the_window_once_its_lease_expires(store: CaseStore):
    due = T0 + timedelta(seconds=600)
    stuck = asyncio.Event()
    a_clock = ManualClock(T0)

    async def hangs(window: datetime) -> None:
        stuck.set()
        await asyncio.Event().wait()

    a, _ = await started([Job(name="miner", run=hangs, every_s=600, durable=True, lease_s=120)], a_clock, store)
    dying = asyncio.create_task(a.run_due(due))
    await asyncio.wait_for(stuck.wait(), 5)

    b_clock = ManualClock(T0)
    body = Recorder(b_clock)
    b, b_registry = await started([Job(name="miner", run=body, every_s=600, durable=True, lease_s=120)], b_clock, store)
    await b.run_due(due)
    assert body.runs == [] and counted(b_registry, "miner", "skipped_claimed") == 1
    await b.run_due(due + timedelta(seconds=119))
    assert body.runs == []
    await b.run_due(due + timedelta(seconds=300))
    assert body.runs == [(due, due + timedelta(seconds=120))]
    assert counted(b_registry, "miner", "ran") == 1
    dying.cancel()
    await asyncio.gather(dying, return_exceptions=True)


async def test_a_durable_run_that_outlasts_its_lease_keeps_its_window_while_its_replica_lives(store: CaseStore):
    due = T0 + timedelta(seconds=600)
    a_clock, b_clock = ManualClock(T0), ManualClock(T0)

    async def lease_until() -> datetime:
        async with store.engine.connect() as conn:
            row = (await conn.execute(sa.select(JOB_CLAIM.c.lease_until).where(JOB_CLAIM.c.due_at == due))).one()
        return row.lease_until  # type: ignore[no-any-return]

    async def long(window: datetime) -> None:
        for _ in range(3):  # 300 s of work, on a lease of 120 s renewed every 40 s
            a_clock.advance(100)
            await wait_for(lambda: lease_until_is(a_clock.now() + timedelta(seconds=120)), timeout_s=5)

    async def lease_until_is(moment: datetime) -> bool:
        return await lease_until() == moment

    a, a_registry = await started([Job(name="miner", run=long, every_s=600, durable=True, lease_s=120)], a_clock, store)
    body = Recorder(b_clock)
    b, b_registry = await started([Job(name="miner", run=body, every_s=600, durable=True, lease_s=120)], b_clock, store)
    running = asyncio.create_task(a.run_due(due))
    await wait_for(lambda: a_clock.now() >= due + timedelta(seconds=200), timeout_s=5)
    await b.run_due(due + timedelta(seconds=250))  # past the first lease, within the renewed one
    await running
    await b.run_due(due + timedelta(seconds=500))  # past the last lease: the window is done
    assert body.runs == []
    assert counted(a_registry, "miner", "ran") == 1 and counted(b_registry, "miner", "skipped_claimed") == 1


async def test_a_durable_job_whose_window_passed_while_vigil_was_down_runs_once_after_restart(store: CaseStore):
    clock = ManualClock(datetime(2026, 11, 2, 10, 0, tzinfo=UTC))
    body = Recorder(clock)
    report = Job(name="report", run=body, at=time(3, 0), durable=True)
    before, _ = await started([report], clock, store)
    await before.run_due(clock.now())
    await before.stop()
    assert body.runs == []  # a first start does not run the window already past that day

    clock.advance_to(datetime(2026, 11, 4, 12, 0, tzinfo=UTC))  # down over the 3rd's and the 4th's windows
    # Two replicas come back at once: one runs the missed window, for the latest of the windows missed.
    after, registry = await started([report], clock, store)
    other, other_registry = await started([report], clock, store)
    await after.run_due(clock.now())
    await other.run_due(clock.now())
    assert body.runs == [(datetime(2026, 11, 4, 3, 0, tzinfo=UTC), datetime(2026, 11, 4, 12, 0, tzinfo=UTC))]
    assert counted(registry, "report", "ran") == 1 and counted(other_registry, "report", "skipped_claimed") == 1
    await after.stop()
    await other.stop()

    clock.advance_to(datetime(2026, 11, 4, 13, 0, tzinfo=UTC))
    again, _ = await started([report], clock, store)
    await again.run_due(datetime(2026, 11, 5, 3, 0, tzinfo=UTC))
    assert body.dues == [datetime(2026, 11, 4, 3, 0, tzinfo=UTC), datetime(2026, 11, 5, 3, 0, tzinfo=UTC)]


async def test_a_durable_job_that_fails_closes_its_window_and_runs_the_next(store: CaseStore):
    clock = ManualClock(T0)
    body = Recorder(clock, failing={T0 + timedelta(seconds=600)})
    job = Job(name="sweep", run=body, every_s=600, durable=True)
    a, registry = await started([job], clock, store)
    b, _ = await started([job], clock, store)
    await a.run_due(T0 + timedelta(seconds=1200))
    await b.run_due(T0 + timedelta(hours=1))  # the failed window is not run again after its lease
    assert body.dues == [T0 + timedelta(seconds=600 * n) for n in range(1, 7)]
    assert (counted(registry, "sweep", "failed"), counted(registry, "sweep", "ran")) == (1, 1)


# --- On the system clock, with APScheduler ---


async def test_on_the_system_clock_apscheduler_runs_a_short_interval_job_at_its_windows():
    clock = SystemClock()
    body = Recorder(clock)
    scheduler, registry = await started([Job(name="tick", run=body, every_s=0.2)], clock)
    try:
        await wait_for(lambda: len(body.runs) >= 2, timeout_s=2)
    finally:
        await scheduler.stop()
    dues = body.dues
    assert dues == sorted(set(dues))  # each window once, in order
    assert all(due.timestamp() * 5 == pytest.approx(round(due.timestamp() * 5)) for due in dues)  # the 0.2 s grid
    assert all(due <= ran for due, ran in body.runs)
    assert counted(registry, "tick", "ran") == len(dues)
    # Nothing runs once stopped: give it more than an interval to show it would.
    await asyncio.sleep(0.3)
    assert body.dues == dues


async def test_on_the_system_clock_two_replicas_share_each_durable_window(store: CaseStore):
    clock = SystemClock()
    bodies = [Recorder(clock), Recorder(clock)]
    schedulers = [
        (await started([Job(name="tick", run=b, every_s=0.25, durable=True)], clock, store))[0] for b in bodies
    ]
    try:
        await wait_for(lambda: len({*bodies[0].dues, *bodies[1].dues}) >= 3, timeout_s=2)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()
    dues = bodies[0].dues + bodies[1].dues
    assert len(dues) == len(set(dues))


async def test_a_coalescing_job_runs_only_the_latest_of_the_windows_due_at_once_in_its_turn():
    clock = ManualClock(T0)
    refreshed, swept = Recorder(clock), Recorder(clock)
    jobs = [
        Job(name="refresh", run=refreshed, every_s=600, coalesce=True),
        Job(name="sweep", run=swept, every_s=1000),
    ]
    scheduler, registry = await started(jobs, clock)
    until = T0 + timedelta(seconds=3100)
    await scheduler.run_due(until)
    # The refresh's windows at +600 … +3000 collapse into the one at +3000, run with the clock there; the sweep
    # still runs each of its own, each at its time, in order around it.
    assert refreshed.runs == [(T0 + timedelta(seconds=3000), T0 + timedelta(seconds=3000))]
    assert swept.runs == [(T0 + timedelta(seconds=s), T0 + timedelta(seconds=s)) for s in (1000, 2000, 3000)]
    assert counted(registry, "refresh", "ran") == 1 and clock.now() == until
    await scheduler.run_due(until + timedelta(seconds=600))
    assert refreshed.dues[-1] == T0 + timedelta(seconds=3600)


async def test_a_job_failing_with_an_error_vigil_knows_is_counted_and_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
):
    from vigil.core.errors import StoreUnavailable

    async def unreachable(due: datetime) -> None:
        raise StoreUnavailable("cannot connect to the database: OSError")

    clock = ManualClock(T0)
    scheduler, registry = await started([Job(name="sweep", run=unreachable, every_s=600)], clock)
    await scheduler.run_due(T0 + timedelta(seconds=600))
    assert counted(registry, "sweep", "failed") == 1
    (record,) = [r for r in caplog.records if r.name == "vigil.flow.scheduler"]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "cannot connect to the database" in record.getMessage()


async def test_stopping_lets_a_run_in_progress_finish_within_the_grace():
    finished: list[datetime] = []
    began = asyncio.Event()

    async def slow(due: datetime) -> None:
        began.set()
        await asyncio.sleep(0.3)
        finished.append(due)

    scheduler, _ = await started([Job(name="slow", run=slow, every_s=0.2)], SystemClock())
    await asyncio.wait_for(began.wait(), 10)
    await scheduler.stop(grace_s=5)
    assert len(finished) == 1  # it ran to its end instead of being cancelled


async def test_on_a_simulated_clock_a_job_also_runs_at_each_moment_it_wakes_for():
    clock = ManualClock(T0)
    swept = Recorder(clock)
    moments = [T0 + timedelta(seconds=s) for s in (130, 250, 4000)]

    async def wakes(after: datetime) -> datetime | None:
        return next((m for m in moments if m > after), None)

    scheduler, registry = await started(
        [Job(name="timers", run=swept, every_s=1000, coalesce=True, wakes=wakes)], clock
    )
    await scheduler.run_due(T0 + timedelta(seconds=1100))
    at = [T0 + timedelta(seconds=s) for s in (130, 250, 1000)]
    assert swept.runs == [(moment, moment) for moment in at]  # each moment asked for, and its one window
    assert counted(registry, "timers", "ran") == 3 and clock.now() == T0 + timedelta(seconds=1100)


def test_a_durable_job_runs_in_its_windows_only():
    async def never(after: datetime) -> datetime | None:
        return None

    with pytest.raises(ValueError, match="wakes"):
        Job(name="x", run=Recorder(ManualClock(T0)), every_s=60, durable=True, wakes=never)
