"""Approval gates: an action runs only once a person allowed to approve it has approved exactly it, before its
approval window closes, and it runs at most once.

- An approval names the action's ``arguments_hash``: arguments that changed since the analyst saw them are refused.
- ``allow`` actions run on any analyst's approval; ``needs_approval`` ones on the approval of the rule's
  ``@approver`` role or above (analyst < lead < admin); ``deny`` (``declined``) and ``blocked`` ones never.
- An action not approved within ``approval_ttl_s`` of its suggestion expires.
- Approving moves ``suggested`` to ``approved`` and executing claims ``approved`` as ``executing``, each in one
  guarded UPDATE, so a second approval or a second replica finds nothing to move. The connector call carries the
  action id as its idempotency key, so a retry after a timeout is replayed by the system, not run again.
- The claim checks the conjunctive-risk guard again, under the customer's lock: an action that would now complete a
  dangerous chain (one completed since it was suggested) is ``blocked`` instead of run.
- Each step is appended to the audit log in the transaction that takes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.actions.catalog import ConnectorCall
from vigil.actions.metrics import ActionMetrics
from vigil.actions.policy import Verdict
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, Refusal
from vigil.core.clock import Clock
from vigil.core.errors import ConnectorError, VigilError
from vigil.core.faults import fault
from vigil.db.engine import guarded

log = logging.getLogger(__name__)

VIGIL = "vigil"
"""The actor of the steps vigil takes itself."""


class ApprovalRefused(VigilError):
    """An approval or rejection that cannot be taken; ``reason`` says why (the API answers 404, 403 or 409)."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Performer(Protocol):
    """What runs an action on the company's systems (vigil/actions/connectors/)."""

    async def perform(
        self, call: ConnectorCall, arguments: Mapping[str, Any], *, idempotency_key: str
    ) -> dict[str, Any]: ...


class ClaimGuard(Protocol):
    """The conjunctive-risk guard, checked again as an action is claimed (``vigil.actions.history.recheck``)."""

    async def at_claim(self, conn: AsyncConnection, record: ActionRecord, now: datetime) -> ActionRecord | None:
        """In the claim's transaction, under the customer's lock: the action moved to ``blocked``, or None."""
        ...


class Approvals:
    """Records suggested actions, takes approvals and rejections, runs what is approved, expires what is not."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock,
        performer: Performer,
        calls: Callable[[str, str], ConnectorCall | None],
        ttl_s: float,
        timeout_s: float | None,
        metrics: ActionMetrics | None = None,
        guard: ClaimGuard | None = None,
    ) -> None:
        self._metrics = metrics
        self._guard = guard
        self._engine = engine
        self._clock = clock
        self._performer = performer
        self._calls = calls
        self._ttl = timedelta(seconds=ttl_s)
        self._timeout_s = timeout_s

    def expiry(self, suggested_at: datetime) -> datetime:
        """When an action suggested at ``suggested_at`` expires unless approved."""
        return suggested_at + self._ttl

    async def record(self, record: ActionRecord, conn: AsyncConnection | None = None) -> bool:
        """Store a suggested action and its first audit step (``suggested``, ``declined`` or ``blocked``); False
        when the same action with the same arguments is already stored."""
        async with self._writing(conn) as c:
            if not await stored.insert(c, record):
                return False
            if self._metrics is not None:
                self._metrics.suggested.labels(record.name, record.status).inc()
                if record.status == "blocked":
                    self._metrics.blocked.labels(record.rule).inc()
            detail = {"arguments_hash": record.arguments_hash, "verdict": record.verdict, "rule": record.rule}
            step = {"declined": "declined", "blocked": "blocked"}.get(record.status, "suggested")
            await stored.append(c, record, step, at=record.suggested_at, actor=VIGIL, detail=detail)
            return True

    async def redecide(
        self, record: ActionRecord, verdict: Verdict, *, status: str, facts: dict[str, Any]
    ) -> ActionRecord | None:
        """Record a new verdict on an open action (the conversation has since checked the customer's identity, or
        the customer said yes); None when it is no longer open."""
        now = self._clock.now()
        async with self._writing() as conn:
            moved = await stored.move(
                conn,
                record.action_id,
                from_=stored.OPEN,
                to=status,
                verdict=verdict.outcome,
                rule=verdict.rule,
                reason=verdict.reason,
                approver=verdict.approver,
                facts=facts,
            )
            if moved is not None:
                detail = {"verdict": verdict.outcome, "rule": verdict.rule, "was": [record.verdict, record.rule]}
                await stored.append(conn, moved, "redecided", at=now, actor=VIGIL, detail=detail)
        return moved

    async def judge(
        self,
        action_id: str,
        *,
        approve: bool,
        by: str,
        role: str | None,
        arguments_hash: str | None,
        note: str | None = None,
    ) -> ActionRecord:
        """Approve (and then run) or reject the action; ``note`` is the reason given for a rejection, kept in the
        audit log.

        Raises:
            ApprovalRefused: unknown, not open any more, expired, arguments changed, not the caller's to approve, or
                an action that may never run; a refused approval is written to the audit log too.
        """
        now = self._clock.now()
        async with self._writing() as conn:
            record = await stored.get(conn, action_id)
            if record is None:
                raise ApprovalRefused("unknown_action", f"no action {action_id}")
            refusal = stored.refusal(record, approve=approve, role=role, arguments_hash=arguments_hash, now=now)
            if refusal is not None:
                await self._refuse(conn, record, refusal, by=by, role=role, at=now)
            if refusal is not None and refusal[0] == "expired":
                await self._expire(conn, record, now)
        if refusal is not None:
            if self._metrics is not None:
                self._metrics.refused.labels(refusal[0]).inc()
            raise ApprovalRefused(*refusal)
        async with self._writing() as conn:
            moved = await stored.move(
                conn,
                action_id,
                from_=stored.OPEN,
                to="approved" if approve else "rejected",
                decided_by=by,
                decided_at=now,
            )
            if moved is None:
                raise ApprovalRefused("not_open", f"{action_id} was decided meanwhile")
            step = "approved" if approve else "rejected"
            if self._metrics is not None:
                self._metrics.decided.labels(step).inc()
            detail = {"arguments_hash": moved.arguments_hash, **({"reason": note} if note else {})}
            await stored.append(conn, moved, step, at=now, actor=by, role=role, detail=detail)
        return await self.execute(moved) if approve else moved

    async def _refuse(
        self,
        conn: AsyncConnection,
        record: ActionRecord,
        refusal: tuple[Refusal, str],
        *,
        by: str,
        role: str | None,
        at: datetime,
    ) -> None:
        await stored.append(
            conn, record, "refused", at=at, actor=by, role=role, detail={"reason": refusal[0], "detail": refusal[1]}
        )

    async def _expire(self, conn: AsyncConnection, record: ActionRecord, now: datetime) -> None:
        moved = await stored.move(conn, record.action_id, from_=stored.OPEN, to="expired", decided_at=now)
        if moved is not None:
            await stored.append(conn, moved, "expired", at=now, actor=VIGIL)

    async def expire(self) -> int:
        """Expire the suggested actions whose approval window has closed; how many."""
        now = self._clock.now()
        async with self._writing() as conn:
            due = await stored.expired(conn, now)
            for record in due:
                await self._expire(conn, record, now)
        if self._metrics is not None:
            self._metrics.expired.inc(len(due))
        return len(due)

    async def execute(self, record: ActionRecord) -> ActionRecord:
        """Run an approved action once: claim it, call its system with its id as the idempotency key, record the
        result. An action another replica already claimed is returned as it is."""
        now = self._clock.now()
        async with self._writing() as conn:
            if self._guard is not None and (blocked := await self._guard.at_claim(conn, record, now)) is not None:
                return blocked  # a dangerous chain was completed since it was suggested: never run
            claimed = await stored.move(
                conn, record.action_id, from_=("approved",), to="executing", attempts=record.attempts + 1
            )
            if claimed is None:
                return await stored.get(conn, record.action_id) or record
            await stored.append(conn, claimed, "executing", at=now, actor=VIGIL, detail={"attempt": claimed.attempts})
        fault("action.after_claim")
        call = self._calls(claimed.tenant, claimed.name)
        if call is None:
            return await self._finish(claimed, "failed", {"error": f"{claimed.name} has no connector to run it"})
        try:
            result = await self._performer.perform(call, claimed.arguments, idempotency_key=claimed.action_id)
            fault("action.after_call")
        except ConnectorError as exc:
            log.warning(
                "action %s failed: %s", claimed.action_id, exc, extra={"conversation_id": claimed.conversation_id}
            )
            return await self._finish(claimed, "failed", {"error": str(exc), "kind": type(exc).__name__})
        return await self._finish(claimed, "executed", result)

    async def _finish(self, record: ActionRecord, status: str, result: dict[str, Any]) -> ActionRecord:
        now = self._clock.now()
        async with self._writing() as conn:
            done = await stored.move(
                conn, record.action_id, from_=("executing",), to=status, result=result, executed_at=now
            )
            final = done or record
            await stored.append(conn, final, status, at=now, actor=VIGIL, detail={"result": result})
        fault("action.after_result")
        if self._metrics is not None:
            self._metrics.executed.labels(record.name, status).inc()
        return final

    def _writing(self, conn: AsyncConnection | None = None) -> Any:
        if conn is not None:
            return _Borrowed(conn)
        return guarded(self._engine, timeout_s=self._timeout_s, begin=True)


class _Borrowed:
    """A caller's connection, used as if opened here (its transaction is the caller's)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def __aenter__(self) -> AsyncConnection:
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        return None
