"""The action skill: suggests the action a customer's message calls for, decided by the tenant's rulebook, and
takes the analysts' approvals and rejections that come back as ``feedback`` events.

On a customer's message it finds the actions the rulebook's cues name, reads their arguments from the
conversation and the company's systems (each with its provenance), asks the policy, checks the conjunctive-risk
guard, and records the action with its verdict before proposing its card (``kind: "action"``). On any message it
decides again the open actions that wait for the conversation (the identity check, the customer's yes), and says so
when their verdict changes. An ``approved`` or ``rejected`` feedback has been taken already, in the transaction
that recorded it (``vigil.actions.decisions``); the skill then runs the action if it is approved (the first time, on
a redelivery, or on a repeated approval: whichever comes first claims it), and reports the outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.actions import lifecycle
from vigil.actions.approvals import Approvals
from vigil.actions.cards import card, card_key
from vigil.actions.catalog import ActionSpec, Catalog
from vigil.actions.decisions import DECISIONS, action_of
from vigil.actions.facts import Facts, customer, shown
from vigil.actions.lifecycle import Status
from vigil.actions.policy import Verdict
from vigil.actions.reading import (
    Said,
    requested,
)
from vigil.actions.rulebook import Rulebook, Rulebooks
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.cases.locks import customer_locked
from vigil.cases.tables import MESSAGE
from vigil.core.clock import Clock
from vigil.core.faults import fault
from vigil.db.engine import guarded
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal, keyed, suggestion_id
from vigil.wire.events import Event, Feedback, Message
from vigil.wire.proof import Proofs, Unproven

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
        proofs: Proofs,
    ) -> None:
        self._proofs = proofs
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
            proposals += await self._suggest(spec, rulebook, transcript, case, event.message_id)
        return proposals

    async def _suggest(
        self, spec: ActionSpec, rulebook: Rulebook, transcript: Sequence[Said], case: CaseState, origin: str
    ) -> list[Proposal]:
        if spec.connector is None or spec.connector.system not in self._facts.systems:
            return []  # nothing could run it: no system is configured for it
        reading, facts = await self._facts.read(spec, rulebook.catalog, transcript, case.tenant, origin)
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
            action_id=action_id(case.conversation_id, digest, origin),
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
            separate_from=list(verdict.separate_from) or None,
            expires_at=self._approvals.expiry(now),
        )
        guard = self._guard if record.status == Status.SUGGESTED else None
        # The guard's read of the customer's actions and this one's insert are one transaction under the customer's
        # lock: a proposal for the same customer in another conversation, pipeline or replica waits, then sees it.
        async with customer_locked(
            self._engine, record.tenant, record.customer_id if guard else None, at=now, timeout_s=self._timeout_s
        ) as conn:
            escalation = await _guarded(conn, guard, record) if guard is not None else []
            fault("action.after_guard")
            record.suggestion_id = suggestion_id(keyed(case.conversation_id, card_key(record)))
            kept, new = await self._approvals.record(record, conn)
        if new:
            return [card(record, spec, rulebook.catalog.currency), *escalation]
        if kept.action_id == record.action_id:
            # This very message stored it, on an earlier try the pipeline made: its card, so that it can be approved.
            return [card(kept, spec, rulebook.catalog.currency), *(escalation if kept.status == Status.BLOCKED else [])]
        return []  # the same request is on the case already, and not over

    async def _waiting(self, rulebook: Rulebook, case: CaseState) -> list[ActionRecord]:
        """The case's open actions that wait for the conversation (a precondition: the identity check, a yes)."""
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            open_ = await stored.of_conversation(conn, case.conversation_id, statuses=lifecycle.OPEN)
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
                cards.append(card(changed, spec, rulebook.catalog.currency))
        return cards

    async def _judged(self, event: Feedback) -> list[Proposal]:
        """Run the action ``event`` approved, if it is still to run; its card once it ran, or was rejected."""
        if event.verdict not in DECISIONS:
            return []
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            record = await action_of(conn, event)
        if record is None:
            return []
        if record.status == Status.APPROVED:
            if not self._taken(event, record):
                return []  # a decision refused (a forged one, say): it does not start the run of one approved
            fault("action.after_approve")
            record = await self._approvals.execute(record)
            if record.status not in (Status.EXECUTED, Status.FAILED, Status.IN_DOUBT, Status.BLOCKED):
                return []  # another replica has it, or the result waits for the reconciler
        elif not (record.status == Status.REJECTED and event.verdict == "rejected" and record.decided_by == event.by):
            return []  # refused (the audit log says why), or decided and run before
        catalog = self._rulebooks.of(record.tenant).catalog
        spec = catalog.get(record.name)
        proposals = [card(record, spec, catalog.currency)] if spec is not None else []
        if record.status == Status.BLOCKED:  # approved, then blocked as it was claimed: something changed meanwhile
            rulebook = self._rulebooks.of(record.tenant)
            patterns = {p.name for p in rulebook.guard.patterns} if rulebook.guard is not None else set()
            why = (
                f"it completes the risk pattern {record.rule!r}"
                if record.rule in patterns
                else f"the rule {record.rule!r} refuses it now (goodwill was given meanwhile)"
            )
            explanation = f"Blocked {record.name} as it was about to run: {why}.\n{record.reason}"
            proposals.append(_escalation(record, explanation))
        return proposals

    def _taken(self, event: Feedback, record: ActionRecord) -> bool:
        """Whether ``event`` is an approval vigil takes for ``record`` as it stands (approved: it resumes it): its
        proof holds, and the person it proves may approve it."""
        if event.verdict != "approved":
            return False
        now = self._clock.now()
        try:
            proven = self._proofs.verify(event, action_id=record.action_id, tenant=record.tenant, now=now)
        except Unproven:
            return False
        refused = lifecycle.refusal(
            record, approve=True, by=proven.by, role=proven.role, arguments_hash=proven.arguments_hash, now=now
        )
        return refused is None

    async def _transcript(self, conversation_id: str) -> list[Said]:
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            rows = await conn.execute(
                sa.select(MESSAGE.c.message_id, MESSAGE.c.role, MESSAGE.c.text, MESSAGE.c.metadata, MESSAGE.c.author)
                .where(MESSAGE.c.conversation_id == conversation_id)
                .order_by(MESSAGE.c.seq.desc())
                .limit(TRANSCRIPT)
            )
            return [Said(r.message_id, r.role, r.text, r.metadata or {}, r.author) for r in reversed(rows.all())]


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
        return Status.DECLINED
    return Status.SUGGESTED
