"""What the action skill and the approvals use of the rest of the package, per tenant: the connectors that run an
action's call, and the conjunctive-risk guard of the tenant's rulebook over the stored history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.actions.catalog import ConnectorCall
from vigil.actions.connectors.http import Connectors, Operation
from vigil.actions.history import StoredGuard
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
    """The guard of each tenant's rulebook (none when the rulebook declares no risk patterns)."""

    def __init__(self, rulebooks: Rulebooks, engine: AsyncEngine, *, timeout_s: float | None) -> None:
        self._rulebooks = rulebooks
        self._engine = engine
        self._timeout_s = timeout_s

    async def check(self, record: ActionRecord) -> tuple[str, str, str] | None:
        guard = self._rulebooks.of(record.tenant).guard
        if guard is None:
            return None
        return await StoredGuard(guard, self._engine, timeout_s=self._timeout_s).check(record)
