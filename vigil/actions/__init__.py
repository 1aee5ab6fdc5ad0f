"""Actions under policy: the actions a case calls for (a refund, a credit, an address change), suggested with their
arguments traced to where they came from, decided by a Cedar policy, held for approval when they move money,
blocked when they complete a dangerous chain, kept inside a concession budget, and executed exactly once through
the company's systems, or visibly in doubt until the reconciler settles it (``lifecycle`` is the action's life)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.actions.settings import ActionsSettings
from vigil.flow.capability import Capability, Platform, Step

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.ext.asyncio import AsyncEngine

    from vigil.flow.outlet import Outlet
    from vigil.wire.proof import Proofs


def setup(
    settings: ActionsSettings,
    platform: Platform,
    *,
    engine: AsyncEngine,
    bundled: Path,
    timeout_s: float | None,
    outlet: Outlet | None = None,
    proofs: Proofs,
) -> Capability:
    """When enabled: the action skill (which runs what is approved), the keeper that takes approvals and rejections
    with their feedback events, the expiry of actions not approved in time, the reconciler of actions whose run was
    interrupted or is in doubt (which says what became of each through ``outlet``), and the clients of the company's
    systems; ``bundled`` is where the bundled rulebooks are; ``proofs`` verifies who gave each decision."""
    if not settings.enabled:
        return Capability(name="actions")
    from vigil.actions.approvals import Approvals
    from vigil.actions.budget import BudgetMetrics, ConcessionBudget
    from vigil.actions.concessions import Concessions
    from vigil.actions.connectors.http import Connectors
    from vigil.actions.decisions import ApprovalKeeper
    from vigil.actions.facts import Facts
    from vigil.actions.metrics import ActionMetrics
    from vigil.actions.reconciler import Reconciler
    from vigil.actions.rulebook import Rulebooks
    from vigil.actions.running import Running, TenantGuards
    from vigil.actions.skill import ActionSkill
    from vigil.flow.gates import Always
    from vigil.flow.scheduler import Job

    rulebooks = Rulebooks(settings.rulebook, bundled, tenants=settings.tenants)
    connectors = Connectors(settings.systems, backoff=platform.backoff)
    guards = TenantGuards(rulebooks)
    approvals = Approvals(
        engine,
        clock=platform.clock,
        performer=Running(connectors),
        calls=lambda tenant, name: rulebooks.of(tenant).catalog[name].connector,
        ttl_s=settings.approval_ttl_s,
        timeout_s=timeout_s,
        claim_timeout_s=settings.claim_timeout_s,
        metrics=ActionMetrics(platform.registry),
        guard=guards,
    )
    skill = ActionSkill(
        engine=engine,
        rulebooks=rulebooks,
        approvals=approvals,
        facts=Facts(
            engine,
            lookups=connectors,
            offers=Concessions(
                ConcessionBudget(settings.budget),
                engine,
                clock=platform.clock,
                metrics=BudgetMetrics(platform.registry),
                timeout_s=timeout_s,
            ),
            clock=platform.clock,
            timeout_s=timeout_s,
        ),
        guard=guards,
        clock=platform.clock,
        timeout_s=timeout_s,
        proofs=proofs,
    )

    async def load() -> None:
        for tenant in settings.rulebooks:
            rulebooks.of(tenant)

    async def expire(due: object) -> None:
        await approvals.expire()

    reconciler = Reconciler(approvals, rulebooks, outlet)

    return Capability(
        name="actions",
        skills=[skill],
        keepers=[ApprovalKeeper(approvals, proofs, platform.clock)],
        # An action's card is what the policy decided, not a guess: no confidence floor silences it (an approval
        # needs its card), nor the escalation that says why the guard blocked one.
        gates={"action": [Always()], "escalation": [Always()]},
        jobs=[
            # Catching up on state: when many windows fall due at once (a replay jumping ahead), the latest does.
            Job("actions-expiry", run=expire, every_s=settings.expiry_every_s, coalesce=True),
            # Durable: one replica settles each window, and a window missed while vigil was down runs on restart.
            Job(
                "actions-reconcile",
                run=reconciler.run,
                every_s=settings.reconcile_interval_s,
                durable=True,
                coalesce=True,
                lease_s=settings.claim_timeout_s,
            ),
        ],
        starting=[Step("loading the rulebooks", load)],
        closing=[connectors.aclose],
    )
