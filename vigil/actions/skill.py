"""The action skill: suggests the action a customer's message calls for, decided by the tenant's rulebook, and
takes the analysts' approvals and rejections that come back as ``feedback`` events.

On a customer's message it finds the actions the rulebook's cues name, reads their arguments from the
conversation and the company's systems (each with its provenance), asks the policy, checks the conjunctive-risk
guard, and records the action with its verdict before proposing its card (``kind: "action"``). On any message it
decides again the open actions that wait for the conversation (the identity check, the customer's yes), and says so
when their verdict changes. On an ``approved`` or ``rejected`` feedback it takes the decision through the approval
gates, which run what is approved, and reports the outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.actions.approvals import ApprovalRefused, Approvals
from vigil.actions.cards import card, card_key
from vigil.actions.catalog import ActionSpec, Catalog
from vigil.actions.facts import Facts, customer, shown
from vigil.actions.policy import Verdict
from vigil.actions.reading import (
    Said,
    requested,
)
from vigil.actions.rulebook import Rulebook, Rulebooks
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.cases.locks import customer_locked
from vigil.cases.tables import MESSAGE, SUGGESTION
from vigil.core.clock import Clock
from vigil.core.faults import fault
from vigil.db.engine import guarded
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal, keyed, suggestion_id
from vigil.wire.events import Event, Feedback, Message

log = logging.getLogger(__name__)

TRANSCRIPT = 60
"""How many of the latest messages the skill reads."""


class Guard(Protocol):
    """The conjunctive-risk guard: the chain the proposed action would complete, explained, or None."""

    async def check(self, conn: AsyncConnection, record: ActionRecord) -> tuple[str, str, str] | None:
        """``(pattern, description, explanation)`` of the first dangerous chain ``record`` completes, or None; the
        customer's history read on ``conn``, whose transaction holds the customer's lock."""
        ...


class ActionSkill:
    """Suggests actions under the tenant's rulebook, and takes the decisions on them."""

    name = "actions"
    kind = "action"

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        rulebooks: Rulebooks,
        approvals: Approvals,
        facts: Facts,
        guard: Guard | None,
        clock: Clock,
        timeout_s: float | None,
    ) -> None:
        self._engine = engine
        self._rulebooks = rulebooks
        self._approvals = approvals
        self._facts = facts
        self._guard = guard
        self._clock = clock
        self._timeout_s = timeout_s

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if isinstance(event, Feedback):
            return await self._judged(event)
        if not isinstance(event, Message) or case is None or case.status == "closed":
            return []
        if not self._facts.systems:
            return []  # no system to run an action on: nothing to suggest, nothing to read
        rulebook = self._rulebooks.of(case.tenant)
        asked = []
        if event.role == "customer":
            asked = requested(rulebook.catalog, Said(event.message_id, event.role, event.text, event.metadata or {}))
        waiting = await self._waiting(rulebook, case)
        if not asked and not waiting:
            return []  # most messages: read nothing more
        transcript = await self._transcript(case.conversation_id)
        proposals = await self._decide_again(rulebook, transcript, case, waiting)
        for spec in asked:
            proposals += await self._suggest(spec, rulebook, transcript, case)
        return proposals

    async def _suggest(
        self, spec: ActionSpec, rulebook: Rulebook, transcript: Sequence[Said], case: CaseState
    ) -> list[Proposal]:
        if spec.connector is None or spec.connector.system not in self._facts.systems:
            return []  # nothing could run it: no system is configured for it
        reading, facts = await self._facts.read(spec, rulebook.catalog, transcript, case.tenant)
        if reading.missing:
            log.info(
                "%s not suggested: no %s",
                spec.name,
                ", ".join(reading.missing),
                extra={"conversation_id": case.conversation_id},
            )
            return []
        verdict = await self._facts.verdict(rulebook, spec, reading.arguments, facts, case.tenant)
        now = self._clock.now()
        digest = arguments_hash(spec.name, reading.arguments)
        record = ActionRecord(
            action_id=action_id(case.conversation_id, digest),
            conversation_id=case.conversation_id,
            tenant=case.tenant,
            name=spec.name,
            arguments=reading.arguments,
            arguments_hash=digest,
            verdict=verdict.outcome,
            rule=verdict.rule,
            reason=verdict.reason,
            status=_status(verdict, rulebook.catalog),
            suggested_at=now,
            customer_id=customer(facts),
            provenance=reading.provenance,
            facts=shown(facts),
            amount_cents=reading.arguments.get(spec.amount) if spec.amount else None,
            goodwill=spec.goodwill,
            approver=verdict.approver,
            expires_at=self._approvals.expiry(now),
        )
        guard = self._guard if record.status == "suggested" else None
        # The guard's read of the customer's actions and this one's insert are one transaction under the customer's
        # lock: a proposal for the same customer in another conversation, pipeline or replica waits, then sees it.
        async with customer_locked(
            self._engine, record.tenant, record.customer_id if guard else None, at=now, timeout_s=self._timeout_s
        ) as conn:
            escalation = await _guarded(conn, guard, record) if guard is not None else []
            fault("action.after_guard")
            record.suggestion_id = suggestion_id(keyed(case.conversation_id, card_key(record)))
            if not await self._approvals.record(record, conn):
                return []  # the same action with the same arguments is on the case already
        return [card(record, spec), *escalation]

    async def _waiting(self, rulebook: Rulebook, case: CaseState) -> list[ActionRecord]:
        """The case's open actions that wait for the conversation (a precondition: the identity check, a yes)."""
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            open_ = await stored.of_conversation(conn, case.conversation_id, statuses=stored.OPEN)
        return [r for r in open_ if r.verdict == "deny" and r.rule in rulebook.catalog.preconditions]

    async def _decide_again(
        self, rulebook: Rulebook, transcript: Sequence[Said], case: CaseState, waiting: Sequence[ActionRecord]
    ) -> list[Proposal]:
        """Decide again the actions that wait for the conversation; a card for each whose verdict changed."""
        cards = []
        for record in waiting:
            spec = rulebook.catalog.get(record.name)
            if spec is None:
                continue
            facts = await self._facts.about(record, spec, rulebook.catalog, transcript)
            verdict = await self._facts.verdict(rulebook, spec, record.arguments, facts, case.tenant)
            if (verdict.outcome, verdict.rule) == (record.verdict, record.rule):
                continue
            changed = await self._approvals.redecide(
                record, verdict, status=_status(verdict, rulebook.catalog), facts=shown(facts)
            )
            if changed is not None:
                cards.append(card(changed, spec))
        return cards

    async def _judged(self, event: Feedback) -> list[Proposal]:
        if event.verdict not in ("approved", "rejected"):
            return []
        found = await self._action_of(event)
        if found is None:
            return []
        try:
            record = await self._approvals.judge(
                found,
                approve=event.verdict == "approved",
                by=event.by or "unknown",
                role=event.role,
                arguments_hash=event.arguments_hash,
                note=event.text,
            )
        except ApprovalRefused as exc:
            log.warning(
                "%s of %s refused: %s",
                event.verdict,
                found,
                exc.detail,
                extra={"conversation_id": event.conversation_id},
            )
            return []
        spec = self._rulebooks.of(record.tenant).catalog.get(record.name)
        proposals = [card(record, spec)] if spec is not None else []
        if record.status == "blocked":  # approved, then blocked as it was claimed: a chain was completed meanwhile
            explanation = (
                f"Blocked {record.name} as it was about to run: it completes the risk pattern {record.rule!r}.\n"
                f"{record.reason}"
            )
            proposals.append(_escalation(record, explanation))
        return proposals

    async def _action_of(self, event: Feedback) -> str | None:
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            row = (
                await conn.execute(
                    sa.select(SUGGESTION.c.kind, SUGGESTION.c.action).where(
                        SUGGESTION.c.suggestion_id == event.suggestion_id,
                        SUGGESTION.c.conversation_id == event.conversation_id,
                    )
                )
            ).first()
        if row is None or row.kind != "action" or not isinstance(row.action, dict):
            return None
        found = row.action.get("action_id")
        return found if isinstance(found, str) else None

    async def _transcript(self, conversation_id: str) -> list[Said]:
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            rows = await conn.execute(
                sa.select(MESSAGE.c.message_id, MESSAGE.c.role, MESSAGE.c.text, MESSAGE.c.metadata)
                .where(MESSAGE.c.conversation_id == conversation_id)
                .order_by(MESSAGE.c.seq.desc())
                .limit(TRANSCRIPT)
            )
            return [Said(r.message_id, r.role, r.text, r.metadata or {}) for r in reversed(rows.all())]


async def _guarded(conn: AsyncConnection, guard: Guard, record: ActionRecord) -> list[Proposal]:
    """Block ``record`` if it completes a dangerous chain, and say why in an escalation."""
    matched = await guard.check(conn, record)
    if matched is None:
        return []
    pattern, description, explanation = matched
    record.status, record.verdict, record.rule, record.reason, record.approver = (
        "blocked",
        "blocked",
        pattern,
        description,
        None,
    )
    return [_escalation(record, explanation)]


def _escalation(record: ActionRecord, explanation: str) -> Proposal:
    """The escalation that says why the conjunctive-risk guard blocked ``record``."""
    return Proposal(
        kind="escalation",
        text=explanation,
        confidence=0.95,
        why=f"The conjunctive-risk guard blocked {record.name}: {record.reason}",
        key=f"escalation/{record.action_id}",
    )


def _status(verdict: Verdict, catalog: Catalog) -> str:
    if verdict.outcome == "deny" and verdict.rule not in catalog.preconditions:
        return "declined"
    return "suggested"
