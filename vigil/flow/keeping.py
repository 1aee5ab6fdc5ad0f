"""Keepers: what a capability writes in the event's own transaction, so that it is committed with the event or not
at all.

A skill runs after its event is committed, in transactions of its own; a crash between the two, or a retry, leaves
its writes undone or half done. What must happen exactly once because of an event (an approval taking effect with
the feedback that carries it, a promise recorded with the message that makes it, a case's timers stopped with the
``closed`` that ends it) is written by a keeper instead: the case store calls every keeper on each new event of a
group-committed batch, inside that batch's transaction. A redelivered event is not new, so keepers never see it
twice; an event whose batch fails is kept again when it is written again.

A keeper whose writes gain from being made for the whole batch at once (a few multi-row statements rather than a
few per event) is a ``BatchKeeper``: it is called once per batch with every new event and its case, in the batch's
order (events of one conversation come one per batch, unless the batch is recorded one event at a time).

Keepers write, they do not speak: what they find worth saying, a skill proposes after the commit (reading what the
keeper stored). A keeper's error fails the event's write as the store's own would (``StoreUnavailable`` is retried;
any other error has the event written alone, and dead-lettered if it fails alone), so a keeper must not raise for
an event it merely has nothing to do with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.flow.case import CaseState
from vigil.wire.events import Event


class Keeper(Protocol):
    """Writes a capability keeps in the transaction that records the event."""

    name: str

    async def keep(self, conn: AsyncConnection, event: Event, case: CaseState | None) -> None:
        """Write what ``event`` (just inserted on ``conn``, and applied to ``case``) means for this capability;
        ``case`` is None for feedback on a suggestion vigil does not know."""
        ...


@dataclass(frozen=True, slots=True)
class Kept:
    """A new event of a batch, and its case after it (None for feedback on a suggestion vigil does not know)."""

    event: Event
    case: CaseState | None


@runtime_checkable
class BatchKeeper(Protocol):
    """A keeper that writes for a whole batch at once."""

    name: str

    async def keep_batch(self, conn: AsyncConnection, kept: Sequence[Kept]) -> None:
        """Write what the new events of a batch (just inserted on ``conn``) mean for this capability."""
        ...


async def keep_all(conn: AsyncConnection, keepers: Sequence[Keeper | BatchKeeper], kept: Sequence[Kept]) -> None:
    """Have every keeper write for the new events ``kept``, in the keepers' order."""
    if not kept:
        return
    for keeper in keepers:
        if isinstance(keeper, BatchKeeper):
            await keeper.keep_batch(conn, kept)
        else:
            for one in kept:
                await keeper.keep(conn, one.event, one.case)
