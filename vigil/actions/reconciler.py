"""The reconciler's job: settle the actions whose run was interrupted or whose outcome is in doubt
(``Approvals.reconcile``), and show on each one's card what became of it, as the skill does after a run it made.

It runs on the scheduler as a durable job, so one replica takes each window and a window missed while vigil was
down runs on restart. A card that cannot be published now (no pipeline yet) is not lost to the action: the action's
status is stored, and the panel reads it from there.
"""

from __future__ import annotations

import logging
from datetime import datetime

from vigil.actions.approvals import Approvals
from vigil.actions.cards import card, card_key
from vigil.actions.rulebook import Rulebooks
from vigil.core.errors import Unavailable
from vigil.flow.outlet import Outlet

log = logging.getLogger(__name__)


class Reconciler:
    """Settles what may be stuck, and says so on the actions' cards."""

    def __init__(self, approvals: Approvals, rulebooks: Rulebooks, outlet: Outlet | None) -> None:
        self._approvals = approvals
        self._rulebooks = rulebooks
        self._outlet = outlet

    async def run(self, due: datetime) -> None:
        """One window's settling."""
        for record in await self._approvals.reconcile():
            catalog = self._rulebooks.of(record.tenant).catalog
            spec = catalog.get(record.name)
            if self._outlet is None or spec is None:
                continue
            try:
                await self._outlet.announce(
                    card(record, spec, catalog.currency),
                    conversation_id=record.conversation_id,
                    tenant=record.tenant,
                    key=card_key(record),
                )
            except Unavailable as exc:
                log.warning(
                    "the card of action %s (%s) is not published: %s",
                    record.action_id,
                    record.status,
                    exc,
                    extra={"conversation_id": record.conversation_id},
                )
