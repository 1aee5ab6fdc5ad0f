"""The actions section of the settings (``VIGIL_ACTIONS__*``): which rulebook each tenant follows, the company's
systems the actions run against, and how long an approval holds."""

from __future__ import annotations

from pydantic import BaseModel, Field

from vigil.actions.budget import BudgetSettings
from vigil.actions.connectors.settings import SystemSettings

ANY = "*"
"""In ``rulebooks``: every tenant not named."""


class ActionsSettings(BaseModel):
    """Action suggestions, their policy, approvals and execution."""

    enabled: bool = Field(default=True, description="Suggest actions and run the approved ones.")
    rulebooks: dict[str, str] = Field(
        default_factory=lambda: {ANY: "demo"},
        description='The rulebook each tenant follows: the name of a bundled one (knowledge/rulebooks/: "demo", '
        '"tau2-retail", "tau2-airline") or a directory holding actions.yaml and policy.cedar; "*" is every tenant '
        'not named (a rule naming a tenant, Tenant::"acme", needs it named here). JSON, e.g. '
        '{"acme": "/etc/vigil/acme", "*": "demo"}.',
    )

    systems: dict[str, SystemSettings] = Field(
        default_factory=dict,
        description="The company's systems the actions run against and the facts come from, by the name the "
        'rulebook gives them (the demo\'s: orders, billing, crm). JSON, e.g. {"billing": {"base_url": '
        '"https://billing.internal", "token": "...", "timeout_s": 5}}. An action whose system is not here fails.',
    )
    approval_ttl_s: float = Field(
        default=3600.0, gt=0, description="How long a suggested action waits for its approval before it expires."
    )
    budget: BudgetSettings = Field(
        default_factory=BudgetSettings, description="The concession budget: goodwill per tenant per rolling window."
    )
    expiry_every_s: float = Field(default=30.0, gt=0, description="How often expired actions are marked so.")
    reconcile_interval_s: float = Field(
        default=30.0,
        gt=0,
        description="How often the reconciler looks for actions to settle: approved or executing ones whose claim "
        "has lapsed, and those in doubt (their call is sent again under the same idempotency key).",
    )
    claim_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long an approved or executing action is left to the process that claimed it before the "
        "reconciler takes it over (a crash, a replica gone).",
    )

    @property
    def tenants(self) -> frozenset[str]:
        """The tenants ``rulebooks`` names (a rule of a rulebook may name these: ``Tenant::"acme"``)."""
        return frozenset(tenant for tenant in self.rulebooks if tenant != ANY)

    def rulebook(self, tenant: str) -> str:
        """The rulebook ``tenant`` follows: a bundled rulebook's name or a directory."""
        return self.rulebooks.get(tenant) or self.rulebooks.get(ANY) or "demo"
