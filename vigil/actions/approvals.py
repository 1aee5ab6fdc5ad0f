"""Approval gates and execution: an action runs only once a person allowed to approve it has approved exactly it,
before its approval window closes; it runs exactly once, or is visibly in doubt until the reconciler settles it.

- An approval names the action's ``arguments_hash``: arguments that changed since the analyst saw them are refused.
- Who may approve what is ``vigil.actions.lifecycle.refusal``; the moves an action makes are its ``TRANSITIONS``.
- An approval is durable the moment it is accepted: ``decide`` moves the action to ``approved`` (or ``rejected``,
  or writes the refusal) in the transaction that records the feedback event (``ApprovalKeeper``). The skill runs
  it after that commit; if vigil dies first, the reconciler does, or a repeated approval resumes it.
- ``execute`` claims the action (``executing``, with ``claimed_at``) in one guarded UPDATE, calls its system with the
  action id as the idempotency key, and records the result. It never raises: a definite refusal (or a call that
  could never be made: no connector, arguments that fill no path) is ``failed``; a timeout or any unknown outcome of
  the write is ``in_doubt``; a database error writing the result is retried here, and if the database stays away
  the claim lapses and the reconciler finishes the action.
- ``reconcile`` (a durable job on the scheduler) takes over ``approved`` and ``executing`` actions whose claim is
  older than ``claim_timeout_s`` and every ``in_doubt`` one, and re-sends the call under the same idempotency key:
  the system replays what it did, or does it now, or refuses it, and that settles the action.
- The first claim checks the conjunctive-risk guard again, under the customer's lock: an approved action that would
  now complete a dangerous chain (one completed since it was suggested) is ``blocked`` instead of run.
- An action not approved within ``approval_ttl_s`` of its suggestion expires.
- Each step is appended to the audit log in the transaction that takes it.

Failpoints (``vigil.core.faults``): ``action.after_approve`` (an approval is committed with its feedback event,
nothing run yet), ``action.after_claim`` (claimed, not called), ``action.after_call`` (the system answered, the
result not yet written), ``action.after_result`` (the result committed), ``reconcile.after_call`` (the reconciler's
re-sent call answered, the result not yet written).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.actions import lifecycle
from vigil.actions.catalog import ConnectorCall
from vigil.actions.lifecycle import Refusal, Status, Trigger
from vigil.actions.metrics import ActionMetrics
from vigil.actions.policy import Verdict
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord
from vigil.core.clock import Clock
from vigil.core.errors import (
    ConnectorError,
    ConnectorRefused,
    ConnectorTimeout,
    ConnectorUnavailable,
    StoreUnavailable,
)
from vigil.core.faults import fault
from vigil.db.engine import guarded

log = logging.getLogger(__name__)

VIGIL = "vigil"
"""The actor of the steps vigil takes itself."""
WRITE_DELAYS_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0)
"""The waits between attempts to write a result once the system has answered (about 8 s in all): past them the
action stays ``executing``, and the reconciler finishes it once its claim lapses."""

T = TypeVar("T")


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


@dataclass(frozen=True, slots=True)
class Decision:
    """What became of an approval or a rejection: the action as it now is, and the refusal if it was refused."""

    record: ActionRecord
    refused: tuple[Refusal, str] | None = None


class Approvals:
    """Records suggested actions, takes approvals and rejections, runs what is approved, settles what is in doubt,
    expires what is not approved in time."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock,
        performer: Performer,
        calls: Callable[[str, str], ConnectorCall | None],
        ttl_s: float,
        timeout_s: float | None,
        claim_timeout_s: float = 60.0,
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
        self._claim_timeout = timedelta(seconds=claim_timeout_s)
        self._timeout_s = timeout_s

    def expiry(self, suggested_at: datetime) -> datetime:
        """When an action suggested at ``suggested_at`` expires unless approved."""
        return suggested_at + self._ttl

    async def record(self, record: ActionRecord, conn: AsyncConnection | None = None) -> tuple[ActionRecord, bool]:
        """Store a suggested action and its first audit step (``suggested``, ``declined`` or ``blocked``), unless
        the conversation has the same request already and not over (``lifecycle.AGAIN``): the action stored, and
        whether it is ``record``, new. On ``conn``, in its transaction (the guard's, under the customer's lock), if
        given."""
        if conn is not None:
            return await self._record(conn, record)
        async with self._writing() as own:
            return await self._record(own, record)

    async def _record(self, conn: AsyncConnection, record: ActionRecord) -> tuple[ActionRecord, bool]:
        twin = await stored.twin(conn, record.conversation_id, record.arguments_hash, over=lifecycle.AGAIN)
        if twin is not None or not await stored.insert(conn, record):
            return twin or await stored.get(conn, record.action_id) or record, False
        if self._metrics is not None:
            self._metrics.suggested.labels(record.name, record.status).inc()
            if record.status == Status.BLOCKED:
                self._metrics.blocked.labels(record.rule).inc()
        detail = {"arguments_hash": record.arguments_hash, "verdict": record.verdict, "rule": record.rule}
        step = record.status if record.status in (Status.DECLINED, Status.BLOCKED) else Status.SUGGESTED
        await stored.append(conn, record, step, at=record.suggested_at, actor=VIGIL, detail=detail)
        return record, True

    async def redecide(
        self, record: ActionRecord, verdict: Verdict, *, status: str, facts: dict[str, Any]
    ) -> ActionRecord | None:
        """Record a new verdict on an open action (the conversation has since checked the customer's identity, or
        the customer said yes); None when it is no longer open."""
        now = self._clock.now()
        async with self._writing() as conn:
            moved = await _move(
                conn,
                record.action_id,
                Trigger.REDECIDED,
                Status(status),
                verdict=verdict.outcome,
                rule=verdict.rule,
                reason=verdict.reason,
                approver=verdict.approver,
                separate_from=list(verdict.separate_from) or None,
                facts=facts,
            )
            if moved is not None:
                detail = {"verdict": verdict.outcome, "rule": verdict.rule, "was": [record.verdict, record.rule]}
                await stored.append(conn, moved, "redecided", at=now, actor=VIGIL, detail=detail)
        return moved

    async def decide(
        self,
        conn: AsyncConnection,
        record: ActionRecord,
        *,
        approve: bool,
        by: str,
        role: str | None,
        arguments_hash: str | None,
        note: str | None = None,
    ) -> Decision:
        """Approve or reject ``record`` on ``conn`` (the transaction of the feedback event that carries the
        decision): the move and its audit step, or the refusal's audit step (and the expiry, if that is why).
        Approving an action already ``approved`` moves nothing: it is written down as ``resumed``, and the caller
        runs it. ``note`` is the reason given for a rejection."""
        now = self._clock.now()
        refused = lifecycle.refusal(record, approve=approve, by=by, role=role, arguments_hash=arguments_hash, now=now)
        if refused is not None:
            return await self.refuse(conn, record, refused, by=by, role=role)
        detail: dict[str, Any] = {"arguments_hash": record.arguments_hash, **({"reason": note} if note else {})}
        unknown = [part for part in lifecycle.separated(record) if not lifecycle.handled_by(record, part)]
        if approve and unknown:
            # The rule keeps these people out, but the platform did not say who they were: written down, not hidden.
            detail["separation_unchecked"] = unknown
        if approve and record.status == Status.APPROVED:
            await stored.append(conn, record, "resumed", at=now, actor=by, role=role, detail=detail)
            return Decision(record)
        to = Status.APPROVED if approve else Status.REJECTED
        trigger = Trigger.APPROVED if approve else Trigger.REJECTED
        moved = await _move(
            conn,
            record.action_id,
            trigger,
            to,
            decided_by=by,
            decided_at=now,
            **({"claimed_at": now} if approve else {}),
        )
        if moved is None:  # decided meanwhile, by a transaction that committed after this one read it
            why: tuple[Refusal, str] = ("not_open", f"{record.action_id} was decided meanwhile")
            detail = {"reason": why[0], "detail": why[1]}
            await stored.append(conn, record, "refused", at=now, actor=by, role=role, detail=detail)
            return Decision(record, why)
        if self._metrics is not None:
            self._metrics.decided.labels(to.value).inc()
        await stored.append(conn, moved, to.value, at=now, actor=by, role=role, detail=detail)
        return Decision(moved)

    async def refuse(
        self, conn: AsyncConnection, record: ActionRecord, why: tuple[Refusal, str], *, by: str, role: str | None
    ) -> Decision:
        """Write down on ``conn`` that a decision on ``record`` by ``by`` (as ``role``, as the caller claimed) was
        refused, and why (an expired action is moved to ``expired`` too)."""
        now = self._clock.now()
        detail = {"reason": why[0], "detail": why[1]}
        await stored.append(conn, record, "refused", at=now, actor=by, role=role, detail=detail)
        if why[0] == "expired":
            record = await self._expire(conn, record, now) or record
        if self._metrics is not None:
            self._metrics.refused.labels(why[0]).inc()
        return Decision(record, why)

    async def _expire(self, conn: AsyncConnection, record: ActionRecord, now: datetime) -> ActionRecord | None:
        moved = await _move(conn, record.action_id, Trigger.EXPIRED, Status.EXPIRED, decided_at=now)
        if moved is not None:
            await stored.append(conn, moved, Status.EXPIRED, at=now, actor=VIGIL)
        return moved

    async def expire(self) -> int:
        """Expire the suggested actions whose approval window has closed; how many."""
        now = self._clock.now()
        async with self._writing() as conn:
            due = await stored.expired(conn, now, statuses=lifecycle.OPEN)
            for record in due:
                await self._expire(conn, record, now)
        if self._metrics is not None:
            self._metrics.expired.inc(len(due))
        return len(due)

    async def execute(self, record: ActionRecord) -> ActionRecord:
        """Run an approved action once: claim it, call its system with its id as the idempotency key, record the
        result; the action as it then is. Never raises (but for cancellation): what cannot be written now is left
        to the reconciler. An action another replica claimed first is returned as it is."""
        try:
            claimed = await self._claiming(record, trigger=Trigger.CLAIMED)
        except Exception as exc:  # nothing is sent: the approval stands, and the reconciler takes it over
            log.warning("action %s not claimed: %s", record.action_id, exc, extra=_about(record))
            return record
        if claimed is None:
            return await self._current(record)
        try:
            fault("action.after_claim")
        except ConnectorTimeout as exc:  # as if the call had timed out: vigil cannot know whether it went out
            return await self._finish(claimed, Trigger.UNSURE, _error(exc))
        except StoreUnavailable:
            pass  # the claim is committed, and nothing is to be written before the call
        return await self._run(claimed, after_call="action.after_call")

    async def reconcile(self) -> list[ActionRecord]:
        """Settle what may be stuck: take over each ``approved`` or ``executing`` action whose claim is older than
        the claim timeout, and each ``in_doubt`` one, and send its call again under the same idempotency key; the
        actions taken over, as they then are."""
        now = self._clock.now()
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            due = await stored.lapsed(
                conn,
                claimed=(Status.APPROVED, Status.EXECUTING),
                claimed_before=now - self._claim_timeout,
                doubtful=(Status.IN_DOUBT,),
            )
        taken = []
        for record in due:
            claimed = await self._claiming(record, trigger=Trigger.TAKEN_OVER, now=now)
            if claimed is None:
                continue  # settled or claimed meanwhile
            done = await self._run(claimed, after_call="reconcile.after_call")
            taken.append(done)
            if self._metrics is not None:
                self._metrics.reconciled.labels(record.status, done.status).inc()
        if self._metrics is not None:
            async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
                self._metrics.in_doubt.set(await stored.count(conn, (Status.IN_DOUBT,)))
        return taken

    async def _claiming(
        self, record: ActionRecord, *, trigger: Trigger, now: datetime | None = None
    ) -> ActionRecord | None:
        now = now or self._clock.now()
        async with self._writing() as conn:
            return await self._claim(conn, record, trigger=trigger, now=now)

    async def _claim(
        self, conn: AsyncConnection, record: ActionRecord, *, trigger: Trigger, now: datetime
    ) -> ActionRecord | None:
        """Claim ``record`` for a call to its system on ``conn`` (one transaction, the audit step with it): from
        ``approved`` when it runs after its approval, or, taken over by the reconciler, from ``record``'s own
        status as it was read, if its claim has lapsed (``in_doubt`` at any time). None: someone else has it."""
        from_, lapsed = lifecycle.sources(trigger, Status.EXECUTING), None
        if trigger is Trigger.TAKEN_OVER:
            if record.status not in from_:
                return None
            from_ = (record.status,)  # as it was read: its claim lapsed in that status
            lapsed = None if record.status == Status.IN_DOUBT else now - self._claim_timeout
        # Never called yet: a dangerous chain completed since it was suggested blocks it (``in_doubt`` and
        # ``executing`` ones may have run already: they are settled, not blocked).
        if (
            record.status == Status.APPROVED
            and self._guard is not None
            and await self._guard.at_claim(conn, record, now) is not None
        ):
            return None
        claimed = await stored.move(
            conn,
            record.action_id,
            from_=from_,
            to=Status.EXECUTING,
            claimed_before=lapsed,
            attempts=record.attempts + 1,
            claimed_at=now,
        )
        if claimed is None:
            return None
        detail: dict[str, Any] = {"attempt": claimed.attempts}
        if trigger is Trigger.TAKEN_OVER:
            detail["taken_over"] = record.status
        await stored.append(conn, claimed, Status.EXECUTING, at=now, actor=VIGIL, detail=detail)
        return claimed

    async def _run(self, claimed: ActionRecord, *, after_call: str) -> ActionRecord:
        """Call ``claimed``'s system and record what came of it."""
        try:
            call = self._calls(claimed.tenant, claimed.name)
        except Exception as exc:  # the rulebook no longer has the action: nothing was sent
            return await self._finish(claimed, Trigger.REFUSED, _error(exc, f"{claimed.name} cannot be run now"))
        if call is None:
            error = {"error": f"{claimed.name} has no connector to run it"}
            return await self._finish(claimed, Trigger.REFUSED, error)
        try:
            result = await self._performer.perform(call, claimed.arguments, idempotency_key=claimed.action_id)
        except (ConnectorTimeout, ConnectorUnavailable) as exc:
            # Sent, or perhaps sent: the system may have made the change. Re-sent under the same key, it says.
            log.warning("action %s in doubt: %s", claimed.action_id, exc, extra=_about(claimed))
            return await self._finish(claimed, Trigger.UNSURE, _error(exc))
        except ConnectorRefused as exc:
            log.warning("action %s refused: %s", claimed.action_id, exc, extra=_about(claimed))
            return await self._finish(claimed, Trigger.REFUSED, _error(exc))
        except ConnectorError as exc:
            log.warning("action %s failed: %s", claimed.action_id, exc, extra=_about(claimed))
            return await self._finish(claimed, Trigger.REFUSED, _error(exc))
        except Exception as exc:  # raised before anything was sent (a path its arguments cannot fill)
            log.exception("action %s could not be run", claimed.action_id, extra=_about(claimed))
            return await self._finish(claimed, Trigger.REFUSED, _error(exc, "it could not be run"))
        try:
            fault(after_call)
        except ConnectorTimeout as exc:  # the answer was lost on its way back: the system may have done it
            return await self._finish(claimed, Trigger.UNSURE, _error(exc))
        except StoreUnavailable as exc:  # the database failed as the result was about to be written
            return await self._finish(claimed, Trigger.SUCCEEDED, result, failed=exc)
        return await self._finish(claimed, Trigger.SUCCEEDED, result)

    async def _finish(
        self, record: ActionRecord, trigger: Trigger, result: dict[str, Any], *, failed: Exception | None = None
    ) -> ActionRecord:
        """Write the outcome of ``record``'s call, retrying database errors (``failed``: the first attempt's); the
        action as it then is (still ``executing`` if the database stayed away: the reconciler finishes it)."""
        to = {Trigger.SUCCEEDED: Status.EXECUTED, Trigger.UNSURE: Status.IN_DOUBT}.get(trigger, Status.FAILED)

        async def write() -> ActionRecord | None:
            now = self._clock.now()
            async with self._writing() as conn:
                done = await _move(
                    conn,
                    record.action_id,
                    trigger,
                    to,
                    result=result,
                    executed_at=now if to == Status.EXECUTED else None,
                )
                if done is not None:
                    await stored.append(conn, done, to.value, at=now, actor=VIGIL, detail={"result": result})
                return done

        try:
            done = await _persist(f"writing the result of {record.action_id}", write, failed=failed)
        except Exception as exc:
            log.error(
                "the result of action %s is not written (%s); the reconciler will settle it once its claim lapses",
                record.action_id,
                exc,
                extra=_about(record),
            )
            return record
        fault("action.after_result")
        if done is None:  # another replica's reconciler got there first
            return await self._current(record)
        if self._metrics is not None:
            self._metrics.executed.labels(record.name, to.value).inc()
        return done

    async def _current(self, record: ActionRecord) -> ActionRecord:
        try:
            async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
                return await stored.get(conn, record.action_id) or record
        except Exception:
            return record

    def _writing(self) -> Any:
        return guarded(self._engine, timeout_s=self._timeout_s, begin=True)


async def _move(
    conn: AsyncConnection, action_id: str, trigger: Trigger, to: Status, **values: Any
) -> ActionRecord | None:
    """The table's move ``trigger`` to ``to``, made by the store from the statuses the table says it may leave."""
    return await stored.move(conn, action_id, from_=lifecycle.sources(trigger, to), to=to, **values)


async def _persist(what: str, write: Callable[[], Awaitable[T]], *, failed: Exception | None = None) -> T:
    """``write()``, again after each of ``WRITE_DELAYS_S`` while it fails (``failed``: it already has once); the
    last error propagates.

    The waits are the event loop's, not the clock's: a simulated clock that nobody moves must not hold a result
    that the database can take now."""
    delays = iter(WRITE_DELAYS_S)
    while True:
        if failed is not None:
            delay = next(delays, None)
            if delay is None:
                raise failed
            log.warning("%s failed, retrying in %g s: %s", what, delay, failed)
            await asyncio.sleep(delay)
        try:
            return await write()
        except Exception as exc:
            failed = exc


def _error(exc: BaseException, what: str | None = None) -> dict[str, Any]:
    error = f"{what}: {exc}" if what else str(exc)
    return {"error": error, "kind": type(exc).__name__}


def _about(record: ActionRecord) -> dict[str, str]:
    return {"conversation_id": record.conversation_id}
