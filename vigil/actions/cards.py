"""An action's card: the ``action`` suggestion that shows exactly what would run, where each argument came from, the
rule behind the verdict, and where the action stands; and, when the customer's text was disguised (invisible
characters, look-alike letters), that it was and how, so the analyst is warned. A new card (a new key, so a new
suggestion id) is made whenever the verdict or the status changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vigil.actions.catalog import ActionSpec
from vigil.actions.facts import disguise
from vigil.cases.actions import ActionRecord
from vigil.core.money import money
from vigil.flow.skills import Proposal
from vigil.wire.events import Action


def card_key(record: ActionRecord) -> str:
    return f"action/{record.action_id}/{record.status}/{record.verdict}/{record.rule}"


def card(record: ActionRecord, spec: ActionSpec, currency: str | None) -> Proposal:
    """The action's card: what will run, exactly, and the rule behind the verdict; its amount in ``currency``
    (the rulebook's)."""
    title = _title(spec, record.arguments, currency)
    disguised = disguise(record.facts)
    warning = f" Disguised: the customer's text {_listed(disguised)}; read as it looks." if disguised else ""
    return Proposal(
        kind="action",
        text=f"{title}. {_standing(record)}{warning}",
        confidence=0.9,
        why=f"{record.rule}: {record.reason}",
        action=Action(
            name=record.name,
            arguments=record.arguments,
            title=title,
            action_id=record.action_id,
            arguments_hash=record.arguments_hash,
            status=record.status,
            verdict=record.verdict,
            rule=record.rule,
            reason=record.reason,
            approver=record.approver,
            provenance=record.provenance,
            expires_at=record.expires_at.isoformat() if record.expires_at else None,
            result=record.result,
            disguised=list(disguised),
        ),
        key=card_key(record),
    )


def _title(spec: ActionSpec, arguments: Mapping[str, Any], currency: str | None) -> str:
    shown = {k: (money(v, currency) if k == spec.amount and isinstance(v, int) else v) for k, v in arguments.items()}
    try:
        return (spec.suggest.title if spec.suggest else spec.description).format(**shown)
    except (KeyError, IndexError, ValueError):
        return spec.description


def _standing(record: ActionRecord) -> str:
    if record.status == "executed":
        return "Done."
    if record.status == "failed":
        return f"It failed: {(record.result or {}).get('error', 'see the audit log')}"
    if record.status == "in_doubt":
        why = (record.result or {}).get("error", "its system did not answer")
        return f"In doubt: {why}. It may have been done; vigil asks the system again until it knows."
    if record.status in ("approved", "executing"):
        return "Approved; running."
    if record.status in ("rejected", "expired"):
        return f"{record.status.capitalize()}."
    if record.status == "blocked":
        return f"Blocked: {record.reason}"
    if record.status == "declined":
        return f"Declined ({record.rule}): {record.reason}"
    if record.verdict == "deny":
        return f"Waiting ({record.rule}): {record.reason}"
    if record.verdict == "needs_approval":
        article = "an" if (record.approver or "")[:1] in tuple("aeiou") else "a"
        return f"Needs {article} {record.approver}'s approval ({record.rule}): {record.reason}"
    return f"Allowed ({record.rule}); it runs when you approve it."


def _listed(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
