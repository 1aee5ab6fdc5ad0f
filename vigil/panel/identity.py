"""Who is signed in to the panel: a name, a role and the tenants they may see."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for annotations: the settings import pydantic, which `vigil token --help` need not
    from vigil.panel.settings import PanelRole

ROLES: tuple[PanelRole, ...] = ("analyst", "lead", "admin")
ALL_TENANTS = "*"


@dataclass(frozen=True, slots=True)
class Identity:
    """A signed-in person. ``tenants`` holds ``"*"`` when they may see every tenant."""

    name: str
    role: PanelRole
    tenants: tuple[str, ...]

    def may_see(self, tenant: str) -> bool:
        """Whether this person may see a conversation of ``tenant``."""
        return ALL_TENANTS in self.tenants or tenant in self.tenants

    def at_least(self, role: PanelRole) -> bool:
        """Whether this person's role is ``role`` or above (analyst < lead < admin)."""
        return ROLES.index(self.role) >= ROLES.index(role)

    def visible(self, tenants: Iterable[str]) -> list[str]:
        """The tenants of ``tenants`` this person may see."""
        return [t for t in tenants if self.may_see(t)]

    @property
    def tenant_filter(self) -> tuple[str, ...] | None:
        """The tenants to filter queries by, or None for all."""
        return None if ALL_TENANTS in self.tenants else self.tenants
