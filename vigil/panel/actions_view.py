"""A case's actions as the conversation page shows them: one card per action, with exactly the arguments that would
run and where each came from, the verdict with the rule behind it, who must approve, where it stands, and the
Approve and Reject buttons only for a person who may use them; below, the case's audit log.

Who may decide is the API's own rule (``vigil.actions.lifecycle.refusal``), asked of each action with the signed-in
person's role at the moment the page is drawn, so the page never offers what ``POST /api/actions/{id}/approve``
would refuse. The buttons carry the ``arguments_hash`` drawn on the card: an approval binds to the arguments the
person saw, and a card that has changed since is refused (409) rather than run. The section is drawn on the server
(``templates/_actions.html``) and drawn again by ``/panel/actions/{id}`` when a new action card arrives live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from vigil.actions.lifecycle import phase, refusal
from vigil.cases.actions import ActionRecord, AuditEntry
from vigil.cases.tables import SUGGESTION
from vigil.cases.views import ActionView, CaseViews, ConversationView
from vigil.panel.display import Display
from vigil.panel.identity import Identity
from vigil.panel.progress import Countdown, countdown, moment, words_of

STATUS_WORDS: dict[str, str] = {
    "suggested": "Waiting for a decision",
    "waiting": "Waiting for the conversation",
    "approved": "Approved, about to run",
    "rejected": "Rejected",
    "executing": "Running",
    "in_doubt": "In doubt: the system may have done it; vigil is asking it again",
    "executed": "Executed",
    "failed": "Failed",
    "expired": "Expired: not approved in time",
    "declined": "Declined by the policy: it cannot run",
    "blocked": "Blocked by the risk guard: it cannot run",
}
VERDICT_WORDS: dict[str, str] = {
    "allow": "Allowed",
    "needs_approval": "Needs approval",
    "deny": "Denied",
    "blocked": "Blocked",
}
_QUOTE_CHARS = 120


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument exactly as it would be sent, and where vigil found it."""

    name: str
    value: str
    """The value as sent (a string as is, anything else as JSON)."""
    money: str | None
    """For the action's amount in cents: the amount for people ("89.99")."""
    origin: str
    """Where it came from, for people: "from the customer's message: ORD-10001"."""


@dataclass(frozen=True, slots=True)
class ActionCard:
    """One action of the case."""

    action_id: str
    name: str
    title: str
    """What it does, with its arguments, as its cards name it ("Refund 89.99 on order ORD-10001"), else its name in
    words."""
    arguments: list[Argument]
    arguments_hash: str
    verdict: str
    verdict_words: str
    rule: str
    reason: str
    approver: str | None
    """The role that must approve (for ``needs_approval``); None when any analyst may, or nobody."""
    status: str
    status_words: str
    expiry: Countdown | None
    """For an open action with an expiry: the time left to decide."""
    decided: str | None
    """"by lee at 10:42" once someone decided it."""
    result: str | None
    """What the system answered once it ran (or why it failed), for people: "Refund id: RF-70004 · Amount:
    £62.49 · Status: completed"."""
    may_approve: bool
    may_reject: bool
    disguised: str | None = None
    """"used letters of another script that look Latin": what disguised the customer's request, in words."""
    kept_out: str | None = None
    """Why the reader may not approve it though their role may ("ana read back this action; another person
    approves it"): the rule's separation of duties."""


@dataclass(frozen=True, slots=True)
class AuditStep:
    """One line of the audit log."""

    at: str
    at_iso: str
    action: str
    """The action's name in words."""
    step: str
    actor: str
    role: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class CaseActions:
    """The conversation page's Actions section."""

    cards: list[ActionCard]
    audit: list[AuditStep]


async def case_actions(
    views: CaseViews, view: ConversationView, who: Identity, display: Display, now: datetime
) -> CaseActions:
    """The Actions section of ``view`` for ``who``: its actions, their titles and its audit log, read."""
    if not view.actions:
        return CaseActions(cards=[], audit=[])
    log = await views.audit(view.conversation_id, tenants=who.tenant_filter) or []
    return actions_of(view, log, who, display, now, await titles(views, view.conversation_id))


async def titles(views: CaseViews, conversation_id: str) -> dict[str, str]:
    """Each action's title as its cards give it ("Refund 89.99 on order ORD-10001"), by action id. The title is
    made from the arguments alone, so every card of an action gives the same one."""
    s = SUGGESTION.c
    stmt = sa.select(s.action).where(s.conversation_id == conversation_id, s.kind == "action")
    found: dict[str, str] = {}
    async with views.reading() as conn:
        for (action,) in await conn.execute(stmt):
            if isinstance(action, dict) and isinstance(action.get("action_id"), str) and action.get("title"):
                found[action["action_id"]] = str(action["title"])
    return found


def actions_of(
    view: ConversationView,
    log: Iterable[AuditEntry],
    who: Identity,
    display: Display,
    now: datetime,
    named: Mapping[str, str] | None = None,
) -> CaseActions:
    """``view``'s actions and audit log for ``who``, at ``now``; ``named``: each action's title, by id."""
    named = named or {}
    names = {a.action_id: words_of(a.name) for a in view.actions}
    return CaseActions(
        cards=[card_of(view, a, who, display, now, named.get(a.action_id)) for a in view.actions],
        audit=[step_of(e, names.get(e.action_id, e.action_id), display, now) for e in log],
    )


def card_of(
    view: ConversationView, a: ActionView, who: Identity, display: Display, now: datetime, title: str | None
) -> ActionCard:
    """One action's card; its buttons as the API would answer ``who`` at ``now``."""
    record = _record(view, a)
    open_ = refusal(record, approve=False, by=who.name, role=who.role, arguments_hash=None, now=now) is None
    # Approving an action already approved resumes it (its run never started): the button says "Run it now".
    refused = refusal(record, approve=True, by=who.name, role=who.role, arguments_hash=None, now=now)
    may_approve = refused is None
    amount = next((k for k, v in a.arguments.items() if k.endswith("_cents") and v == a.amount_cents), None)
    return ActionCard(
        action_id=a.action_id,
        name=a.name,
        title=title or words_of(a.name),
        arguments=[
            Argument(
                name=k,
                value=v if isinstance(v, str) else json.dumps(v, ensure_ascii=False),
                money=display.money(v) if k == amount and isinstance(v, int) else None,
                origin=origin(a.provenance.get(k)),
            )
            for k, v in a.arguments.items()
        ],
        arguments_hash=a.arguments_hash,
        verdict=a.verdict,
        verdict_words=VERDICT_WORDS.get(a.verdict, words_of(a.verdict)),
        rule=a.rule,
        reason=a.reason,
        approver=(a.approver or "analyst") if a.verdict == "needs_approval" else None,
        status=a.status,
        status_words=STATUS_WORDS.get(phase(a.status, a.verdict), words_of(a.status)),
        expiry=countdown(a.expires_at, None, display, now) if a.status == "suggested" and a.expires_at else None,
        decided=f"by {a.decided_by} at {moment(a.decided_at, display, now)}" if a.decided_by and a.decided_at else None,
        result=result_words(a.result, display) if a.result else None,
        may_approve=may_approve,
        may_reject=open_,
        kept_out=refused[1].split(": ", 1)[-1] if refused and refused[0] == "same_person" else None,
        disguised=" and ".join(a.disguised) or None,
    )


def origin(where: Any) -> str:
    """Where an argument came from, for people (``vigil/actions/reading.py`` writes these)."""
    if not isinstance(where, dict):
        return "where it came from was not recorded"
    source = str(where.get("source", ""))
    if source == "message":
        whose = f"the {where['role']}'s message" if where.get("role") else "a message"
        quote = str(where.get("quote") or "")
        return f"from {whose}: {_cut(quote)}" if quote else f"from {whose} {where.get('message_id', '')}".rstrip()
    if source == "metadata":
        return f"from the message's metadata: {where.get('field', '')}".rstrip(": ")
    if source == "budget":
        return f"from the concession budget: {where['detail']}" if where.get("detail") else "from the budget"
    if source == "rulebook":
        return f"from the rulebook: {where['detail']}" if where.get("detail") else "from the rulebook"
    if where.get("call"):
        field = f" → {where['field']}" if where.get("field") else ""
        return f"from {source}: {where['call']}{field}"
    return f"from {source}" + (f" ({where['field']})" if where.get("field") else "")


def step_of(entry: AuditEntry, action: str, display: Display, now: datetime) -> AuditStep:
    """One audit entry for people."""
    return AuditStep(
        at=moment(entry.at, display, now),
        at_iso=entry.at.isoformat(),
        action=action,
        step=entry.step,
        actor=entry.actor,
        role=entry.role,
        detail=detail_words(entry.detail),
    )


def detail_words(detail: Mapping[str, Any]) -> str:
    """An audit entry's detail, short: the rule and verdict, a refusal's reason, a result."""
    if not detail:
        return ""
    if "detail" in detail:  # a refusal says why
        return str(detail["detail"])
    if "rule" in detail:
        was = detail.get("was")
        before = f" (was {was[0]}, {was[1]})" if isinstance(was, list) and len(was) == 2 else ""
        return f"{detail.get('verdict', '')} by {detail['rule']}{before}".strip()
    if "result" in detail:
        return _compact(detail["result"])
    if "attempt" in detail:
        return f"attempt {detail['attempt']}"
    if "arguments_hash" in detail:
        return f"arguments {str(detail['arguments_hash'])[:12]}…"
    return _compact(detail)


def _record(view: ConversationView, a: ActionView) -> ActionRecord:
    """The stored action as ``refusal`` reads it."""
    fields = a.model_dump(include={"action_id", "name", "arguments", "arguments_hash", "verdict", "rule", "reason"})
    return ActionRecord(
        **fields,
        conversation_id=view.conversation_id,
        tenant=view.tenant,
        status=a.status,
        suggested_at=a.suggested_at,
        approver=a.approver,
        expires_at=a.expires_at,
        separate_from=a.separate_from,
        facts={"_people": a.handled_by},
    )


def result_words(result: Mapping[str, Any], display: Display) -> str:
    """What a system answered, for people: each field named in words, amounts in cents as money, a record it
    embeds by its id (the audit log keeps the whole answer), one line."""
    parts = []
    for key, value in result.items():
        name = key.removesuffix("_cents") if key.endswith("_cents") else key
        if key.endswith("_cents") and isinstance(value, int) and not isinstance(value, bool):
            shown = display.money(value)
        elif isinstance(value, str | int | float | bool) or value is None:
            shown = str(value)
        elif isinstance(value, Mapping) and "id" in value:
            shown = str(value["id"])
        elif isinstance(value, list):
            shown = f"{len(value)} item{'s' if len(value) != 1 else ''}"
        else:
            continue
        parts.append(f"{words_of(name)}: {shown}")
    return _cut(" · ".join(parts), 300)


def _compact(value: Any) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")), 200)


def _cut(text: str, limit: int = _QUOTE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
