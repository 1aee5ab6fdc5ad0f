"""The next-step skill: where a running case stands in its procedure, and what the analyst does next.

On a customer's message (the analyst's turn next), the case's procedure is identified (the ``opened`` event's
category when it names a mined procedure, else from the conversation's words), the case is located in it from the
analysts' steps so far (labelled in ``metadata.step``, or placed by their words), and the likeliest next step is
suggested (``next_step``, with ``step: {procedure, label}`` and the step's template reply from mined examples).

On an analyst's message that takes a step the procedure requires another before (identity verification before an
account change), and that other step has not been taken, it says so: a ``next_step`` naming the skipped step.

Both are written to the case's reading (the panel's "next step" and the handover brief).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases import progress
from vigil.cases.states import OPEN
from vigil.cases.tables import MESSAGE
from vigil.core.clock import Clock
from vigil.db.engine import guarded
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.progress import procedures
from vigil.progress.library import Library, turns_of
from vigil.progress.procedures import Procedure, Turn
from vigil.wire.events import Event, Message, StepRef

HISTORY = 80
"""How many of the conversation's latest messages the case is located from."""


class NextStepSkill:
    """Suggests the next step of the case's procedure, and flags a required step skipped."""

    name = "next_step"
    kind = "next_step"

    def __init__(self, *, engine: AsyncEngine, library: Library, clock: Clock, timeout_s: float | None = None) -> None:
        self._engine = engine
        self._timeout_s = timeout_s
        self._library = library
        self._clock = clock

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if case is None or not isinstance(event, Message) or event.role not in ("customer", "analyst"):
            return []
        if case.state not in OPEN:
            return []
        known = await self._library.procedures(case.tenant)
        if not known:
            return []
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            turns = await _turns(conn, case.conversation_id)
            read = await progress.reading(conn, case.conversation_id)
            category = read.category if read is not None else None
            name, sure = procedures.identify(known, turns, category)
            procedure = known[name]
            said: list[Proposal] = []
            if event.role == "analyst":
                said += _skipped(procedure, turns, event)
            ranked = procedures.next_steps(procedure, turns, k=3)
            here = procedures.locate(procedure, turns)
            top = ranked[0] if ranked else None
            await progress.save_step(
                conn,
                case.conversation_id,
                procedure=name,
                step=here,
                next_step=top.label if top else None,
                next_reply=top.template if top else None,
                at=self._clock.now(),
            )
        if event.role == "customer" and top is not None:
            others = ", ".join(f"{n.label} ({n.probability:.0%})" for n in ranked[1:])
            said.append(
                Proposal(
                    kind="next_step",
                    text=top.template,
                    confidence=top.probability * sure,
                    why=f"next step of {name}: {top.label}" + (f"; then likely {others}" if others else ""),
                    step=StepRef(procedure=name, label=top.label),
                )
            )
        return said


def _skipped(procedure: Procedure, turns: list[Turn], event: Message) -> list[Proposal]:
    step = turns[-1].step if turns and turns[-1].role == "analyst" else None
    step = step or procedures.place(procedure, event.text)
    if step is None:
        return []
    missing = procedures.skipped(procedure, turns[:-1], step)
    if not missing:
        return []
    # In the order to take them: a step requiring fewer of the others first.
    gaps = frozenset(missing)
    missing.sort(key=lambda m: (len(gaps.intersection(procedure.requires.get(m, ()))), m))
    first, names = missing[0], ", ".join(missing)
    return [
        Proposal(
            kind="next_step",
            text=f"Before {step}: {names} {'has' if len(missing) == 1 else 'have'} not been done. "
            f"{procedure.steps[first].template}".strip(),
            confidence=0.9,
            why=f"{procedure.name} takes {', '.join(missing)} before {step}",
            step=StepRef(procedure=procedure.name, label=first),
        )
    ]


async def _turns(conn: AsyncConnection, conversation_id: str) -> list[Turn]:
    rows = (
        await conn.execute(
            sa.select(MESSAGE.c.role, MESSAGE.c.text, MESSAGE.c["metadata"])
            .where(MESSAGE.c.conversation_id == conversation_id)
            .order_by(MESSAGE.c.seq.desc())
            .limit(HISTORY)
        )
    ).all()
    return turns_of(list(reversed(rows)))
