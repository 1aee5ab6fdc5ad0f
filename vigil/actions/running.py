"""What the action skill and the approvals use of the rest of the package, per tenant: the connectors that run an
action's call, and the conjunctive-risk guard of the tenant's rulebook over the stored history."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.actions.catalog import ConnectorCall
from vigil.actions.connectors.http import Connectors, Operation
from vigil.actions.history import StoredGuard, recheck, recheck_goodwill
from vigil.actions.rulebook import Rulebooks
from vigil.cases.actions import ActionRecord


class Running:
    """Runs an action's connector call; the action's id is the idempotency key of every write."""

    def __init__(self, connectors: Connectors) -> None:
        self._connectors = connectors

    async def perform(
        self, call: ConnectorCall, arguments: Mapping[str, Any], *, idempotency_key: str
    ) -> dict[str, Any]:
        operation = Operation(
            system=call.system, method=call.method, path=call.path, body=call.body, idempotent=call.method != "GET"
        )
        return await self._connectors.perform(operation, arguments, idempotency_key=idempotency_key)


class TenantGuards:
    """The guard of each tenant's rulebook (none when the rulebook declares no risk patterns), on the caller's
    transaction, which holds the customer's lock (``vigil.actions.history``)."""

    def __init__(self, rulebooks: Rulebooks) -> None:
        self._rulebooks = rulebooks

    async def check(self, conn: AsyncConnection, record: ActionRecord) -> tuple[str, str, str] | None:
        """The chain a proposed action would complete (see ``vigil.actions.skill.Guard``)."""
        guard = self._rulebooks.of(record.tenant).guard
        if guard is None:
            return None
        return await StoredGuard(guard).check(conn, record)

    async def at_claim(self, conn: AsyncConnection, record: ActionRecord, now: datetime) -> ActionRecord | None:
        """The action blocked as it is claimed, or None to run it: the conjunctive-risk guard again
        (``vigil.actions.history.recheck``), then the rulebook again with the goodwill given since it was decided
        (``recheck_goodwill``)."""
        rulebook = self._rulebooks.of(record.tenant)
        if rulebook.guard is not None:
            blocked = await recheck(conn, rulebook.guard, record, now=now)
            if blocked is not None:
                return blocked
        return await recheck_goodwill(conn, rulebook, record, now=now)
