"""The procedures each tenant's cases follow: mined from its resolved cases on the scheduler, stored in the
``procedure`` table, and read by every replica's next-step skill.

The mining job (durable: one replica per window) takes a tenant's latest ``window`` resolved or closed cases (unless
none was resolved, closed or changed since the replica last mined them: the procedures would be the same), each
as its customer and analyst turns (an analyst turn's ``metadata.step`` is its label) with the platform's category
from the ``opened`` event, mines them (vigil/progress/procedures.py) and replaces the tenant's procedures. A
replica reads the stored procedures again when they are older than ``refresh_s``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.cases.states import State
from vigil.cases.tables import CASE_PROGRESS, CONVERSATION, MESSAGE
from vigil.core.clock import Clock
from vigil.db.engine import upsert
from vigil.flow.scheduler import Job
from vigil.progress import procedures
from vigil.progress.procedures import Procedure, Turn
from vigil.progress.tables import PROCEDURE

log = logging.getLogger(__name__)

MINE = "procedures"


def turns_of(rows: Sequence[sa.Row[object]]) -> list[Turn]:
    """A conversation's messages (role, text, metadata) as a procedure's turns; bots and the system left out."""
    out = []
    for row in rows:
        role = row._mapping["role"]
        if role not in ("customer", "analyst"):
            continue
        meta = row._mapping["metadata"] or {}
        step = meta.get("step") if isinstance(meta, dict) else None
        out.append(Turn(role=role, text=row._mapping["text"], step=step if isinstance(step, str) and step else None))
    return out


class Library:
    """The stored procedures, per tenant, read again every ``refresh_s``."""

    def __init__(self, engine: AsyncEngine, *, clock: Clock, refresh_s: float, window: int, min_cases: int) -> None:
        self._engine = engine
        self._min_cases = min_cases
        self._clock = clock
        self._refresh_s = refresh_s
        self._window = window
        self._cache: dict[str, tuple[float, dict[str, Procedure]]] = {}
        self._mined_from: dict[str, tuple[int, datetime | None]] = {}
        """Per tenant, what this replica last mined from: how many resolved cases, and the latest change to one."""

    async def procedures(self, tenant: str) -> dict[str, Procedure]:
        """The tenant's procedures mined from at least ``min_cases`` cases, by name (empty before the first
        mining)."""
        now = self._clock.monotonic()
        cached = self._cache.get(tenant)
        if cached is not None and now - cached[0] < self._refresh_s:
            return cached[1]
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(PROCEDURE.c.body).where(
                        PROCEDURE.c.tenant == tenant, PROCEDURE.c.cases >= self._min_cases
                    )
                )
            ).all()
        loaded = {p.name: p for p in (Procedure.from_dict(row.body) for row in rows)}
        self._cache[tenant] = (now, loaded)
        return loaded

    async def mine(self, now: datetime) -> dict[str, int]:
        """Mine every tenant's procedures from its latest resolved cases; returns the procedures stored per tenant."""
        async with self._engine.connect() as conn:
            tenants = (await conn.execute(sa.select(CONVERSATION.c.tenant).distinct())).scalars().all()
        stored = {}
        for tenant in tenants:
            resolved = await self._resolved(tenant)
            if self._mined_from.get(tenant) == resolved:
                continue  # no case resolved, closed or changed since this replica last mined: the same procedures
            cases = await self._cases(tenant)
            if not cases:
                continue
            # Mining is CPU work (a few seconds for thousands of cases): off the event loop.
            mined = await asyncio.to_thread(procedures.mine, cases)
            await self._store(tenant, mined, now)
            self._cache.pop(tenant, None)
            self._mined_from[tenant] = resolved
            stored[tenant] = len(mined)
        return stored

    def job(self, every_s: float) -> Job:
        """Mining on the scheduler: once per window across replicas."""

        async def run(due: datetime) -> None:
            stored = await self.mine(self._clock.now())
            if stored:
                log.info("procedures mined: %s", stored)

        return Job(name=MINE, run=run, every_s=every_s, durable=True, coalesce=True, lease_s=max(600.0, every_s))

    async def _resolved(self, tenant: str) -> tuple[int, datetime | None]:
        """How many of the tenant's cases are resolved or closed, and when the latest of them changed."""
        c = CONVERSATION.c
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.max(c.updated_at)).where(
                        c.tenant == tenant, c.state.in_([State.RESOLVED.value, State.CLOSED.value])
                    )
                )
            ).one()
        return int(row[0]), row[1]

    async def _cases(self, tenant: str) -> list[tuple[str | None, list[Turn]]]:
        c = CONVERSATION.c
        async with self._engine.connect() as conn:
            heads = (
                await conn.execute(
                    sa.select(c.id, CASE_PROGRESS.c.category)
                    .outerjoin(CASE_PROGRESS, CASE_PROGRESS.c.conversation_id == c.id)
                    .where(c.tenant == tenant, c.state.in_([State.RESOLVED.value, State.CLOSED.value]))
                    .order_by(c.updated_at.desc(), c.id)
                    .limit(self._window)
                )
            ).all()
            ids = [h.id for h in heads]
            messages: dict[str, list[sa.Row[object]]] = {}
            for start in range(0, len(ids), 500):
                rows = await conn.execute(
                    sa.select(MESSAGE.c.conversation_id, MESSAGE.c.role, MESSAGE.c.text, MESSAGE.c["metadata"])
                    .where(MESSAGE.c.conversation_id.in_(ids[start : start + 500]))
                    .order_by(MESSAGE.c.conversation_id, MESSAGE.c.seq)
                )
                for row in rows:
                    messages.setdefault(row.conversation_id, []).append(row)
        cases = [(h.category, turns_of(messages.get(h.id, []))) for h in heads]
        return [(category, turns) for category, turns in cases if any(t.role == "analyst" for t in turns)]

    async def _store(self, tenant: str, mined: dict[str, Procedure], now: datetime) -> None:
        rows = [
            {"tenant": tenant, "name": name, "cases": p.cases, "body": p.to_dict(), "mined_at": now}
            for name, p in mined.items()
        ]
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.delete(PROCEDURE).where(PROCEDURE.c.tenant == tenant, PROCEDURE.c.name.not_in(list(mined)))
            )
            if rows:
                stmt = upsert(conn, PROCEDURE)
                await conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["tenant", "name"],
                        set_={k: stmt.excluded[k] for k in ("cases", "body", "mined_at")},
                    ),
                    rows,
                )
