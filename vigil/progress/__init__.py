"""Progress through the case's life: SLA timers, what the analyst promised and when it falls due, how hard the
customer presses, the next step of the procedure, and a handover brief when the case changes hands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform, Step
from vigil.progress.settings import ProgressSettings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from vigil.flow.outlet import Outlet


def setup(
    settings: ProgressSettings, platform: Platform, *, engine: AsyncEngine, outlet: Outlet, timeout_s: float | None
) -> Capability:
    """When enabled, the progress keeper (timers, commitments and the reading, written with each event), the
    progress skill (escalations and handovers), the next-step skill, the timers' sweep (which speaks through
    ``outlet``) and the procedures' mining."""
    if not settings.enabled:
        return Capability(name="progress")
    from vigil.flow.gates import Always, ConfidenceGate
    from vigil.flow.scheduler import replica_id
    from vigil.progress.commitments import warm_up
    from vigil.progress.keeper import ProgressKeeper
    from vigil.progress.library import Library
    from vigil.progress.next_step import NextStepSkill
    from vigil.progress.reminders import Reminders
    from vigil.progress.skill import ProgressSkill

    reminders = Reminders(
        engine=engine,
        outlet=outlet,
        clock=platform.clock,
        settings=settings,
        registry=platform.registry,
        owner=replica_id(),
        timeout_s=timeout_s,
    )

    async def warm() -> None:
        warm_up()

    library = Library(
        engine,
        clock=platform.clock,
        refresh_s=settings.procedures_refresh_s,
        window=settings.procedures_window,
        min_cases=settings.procedures_min_cases,
    )
    keeper = ProgressKeeper(settings=settings, clock=platform.clock, reminders=reminders)
    return Capability(
        name="progress",
        keepers=[keeper],
        skills=[
            ProgressSkill(engine=engine, settings=settings, clock=platform.clock, keeper=keeper, timeout_s=timeout_s),
            NextStepSkill(engine=engine, library=library, clock=platform.clock, timeout_s=timeout_s),
        ],
        # A procedure's next step is a guess with its own floor; an escalation, a handover brief and a reminder are
        # not guesses: the answers' confidence floor does not silence them.
        gates={
            "next_step": [ConfidenceGate(settings.next_step_min_confidence)],
            "escalation": [Always()],
            "handover": [Always()],
            "follow_up": [Always()],
        },
        jobs=[reminders.job(), library.job(settings.procedures_interval_s)],
        starting=[Step("loading the time parser", warm)],
    )
