"""What the rules are told about a proposed action: its arguments, read from the conversation and the company's
systems with each one's provenance, and the facts (the customer, the identity check, the customer's yes, the order
as the order system has it, the goodwill already given), then the rulebook's verdict on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.actions.catalog import ActionSpec, Catalog
from vigil.actions.lifecycle import RANKS
from vigil.actions.policy import Verdict
from vigil.actions.readback import confirmed
from vigil.actions.reading import (
    REQUEST_KEY,
    Found,
    Reading,
    Request,
    Said,
    customer_of,
    identity_verified,
    read_arguments,
)
from vigil.actions.rulebook import ActionRequest, Rulebook
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord
from vigil.core.clock import Clock
from vigil.core.errors import ConnectorRefused
from vigil.db.engine import guarded

GOODWILL_WINDOW = timedelta(days=30)
DISGUISED_APPROVER = RANKS[-1]
"""Who approves an action asked for in disguised text, whatever the rule would have held it for: the highest role."""


class Lookups(Protocol):
    """Reads from the company's systems (``vigil.actions.connectors.http.Connectors``)."""

    @property
    def systems(self) -> frozenset[str]:
        """The systems configured."""
        ...

    async def fetch(self, system: str, path: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]: ...


class Offers(Protocol):
    """The concession budget: how much goodwill to offer a case that merits ``base_cents``."""

    async def offer(self, tenant: str, base_cents: int) -> Found | None: ...


class Facts:
    """Reads an action's arguments and facts, and asks the rulebook."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        lookups: Lookups | None,
        offers: Offers | None,
        clock: Clock,
        timeout_s: float | None,
    ) -> None:
        self._engine = engine
        self._lookups = lookups
        self._offers = offers
        self._clock = clock
        self._timeout_s = timeout_s

    @property
    def systems(self) -> frozenset[str]:
        """The company's systems configured (none: no action can run)."""
        return self._lookups.systems if self._lookups is not None else frozenset()

    async def read(
        self, spec: ActionSpec, catalog: Catalog, transcript: Sequence[Said], tenant: str, asked: str | None = None
    ) -> tuple[Reading, dict[str, Any]]:
        """The arguments of ``spec``, read from the conversation and the systems, and the facts the rules read;
        ``asked`` is the id of the message that asked for it."""
        customer = customer_of(transcript)
        known = _known(customer)
        first = read_arguments(spec, transcript, known)
        looked = await self._looked_up(catalog, _lookup_values(customer, first.arguments))
        offered = None
        base = spec.suggest.base_cents if spec.goodwill and spec.suggest else None
        if base and self._offers is not None:
            offered = await self._offers.offer(tenant, base)
        elif base:
            offered = Found(base, {"source": "rulebook", "detail": "the goodwill the case merits"})
        reading = read_arguments(spec, transcript, _merged(known, looked), offered, asked)
        facts = await self._established(spec, catalog, transcript, tenant, customer, reading, looked)
        return reading, facts

    async def about(
        self, record: ActionRecord, spec: ActionSpec, catalog: Catalog, transcript: Sequence[Said]
    ) -> dict[str, Any]:
        """The facts the rules read about an action already suggested: the systems asked about its own arguments
        (not whatever id the conversation names last), and the conversation as it now stands. Nothing is offered:
        its arguments are fixed."""
        customer = customer_of(transcript)
        looked = await self._looked_up(catalog, _lookup_values(customer, record.arguments))
        request = Request.from_json(record.facts.get(REQUEST_KEY))
        reading = Reading(spec, dict(record.arguments), dict(record.provenance), request=request)
        return await self._established(spec, catalog, transcript, record.tenant, customer, reading, looked)

    async def _established(
        self,
        spec: ActionSpec,
        catalog: Catalog,
        transcript: Sequence[Said],
        tenant: str,
        customer: Found | None,
        reading: Reading,
        looked: dict[str, Any],
    ) -> dict[str, Any]:
        """The facts: the customer, what the systems said, the identity check, the customer's yes to these
        arguments, the goodwill already given, and the request (kept, not shown to the rules)."""
        facts = _merged(_known(customer), looked)
        facts["identity_verified"] = identity_verified(catalog, transcript) is not None
        asked = reading.request.message_id
        read_back = confirmed(catalog, transcript, spec, reading.arguments, reading.provenance, asked)
        facts["confirmed"] = read_back is not None
        facts["_people"] = _people(transcript, read_back)
        facts[REQUEST_KEY] = reading.request.to_json()
        if customer is not None and spec.goodwill:
            facts["goodwill"] = {"last_30_days_cents": await self._goodwill(tenant, customer.value)}
        return facts

    async def _looked_up(self, catalog: Catalog, arguments: Mapping[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = {"_sources": {}}
        for name, lookup in catalog.lookups.items():
            needed = [part[1:-1] for part in lookup.path.split("/") if part.startswith("{")]
            if self._lookups is None or lookup.system not in self._lookups.systems:
                continue
            if not all(n in arguments for n in needed):
                continue
            try:
                answer = await self._lookups.fetch(lookup.system, lookup.path, arguments)
            except ConnectorRefused as exc:
                found["_refused"] = f"{lookup.system} said {exc.status}: {exc.detail}"
                continue
            found[name] = {key: answer[key] for key in lookup.fields if key in answer}
            path = lookup.path.format(**{n: arguments[n] for n in needed})  # for the provenance only
            found["_sources"][name] = {"source": lookup.system, "call": f"GET {path}"}
        return found

    async def verdict(
        self, rulebook: Rulebook, spec: ActionSpec, arguments: dict[str, Any], facts: Mapping[str, Any], tenant: str
    ) -> Verdict:
        """The rulebook's verdict on ``spec`` with ``arguments`` and ``facts``; a lookup the systems refused (an
        order they do not know) is a deny that says so. An action the rules would let run that was asked for in
        disguised text is held for the highest role, whatever role the rule names, and the reason says why."""
        if "_refused" in facts:
            return Verdict("deny", "lookup_refused", f"The systems cannot confirm the facts: {facts['_refused']}.")
        context = {k: v for k, v in facts.items() if not k.startswith("_")}
        verdict = rulebook.decide(ActionRequest(action=spec.name, args=arguments, context=context, tenant=tenant))
        if verdict.outcome == "deny" or not disguise(facts):
            return verdict
        reason = f"{verdict.reason} The request came in disguised text, so an {DISGUISED_APPROVER} approves it."
        return Verdict("needs_approval", verdict.rule, reason, DISGUISED_APPROVER, verdict.separate_from)

    async def _goodwill(self, tenant: str, customer_id: str) -> int:
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            return await stored.spend(conn, tenant, since=self._clock.now() - GOODWILL_WINDOW, customer_id=customer_id)


def _known(customer: Found | None) -> dict[str, Any]:
    """What the conversation itself says of the facts: the customer the platform names."""
    if customer is None:
        return {"_sources": {}}
    return {"customer": {"id": customer.value}, "_sources": {"customer": customer.source}}


def _lookup_values(customer: Found | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {**({"customer_id": customer.value} if customer is not None else {}), **arguments}


def _merged(known: dict[str, Any], looked: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in looked.items() if k != "_sources"}
    return {**known, **rest, "_sources": {**known["_sources"], **looked["_sources"]}}


def customer(facts: Mapping[str, Any]) -> str | None:
    """The account the facts are about: the one the platform named, else the one the systems say the action
    touches (the order's ``customer_id``), so that the conjunctive-risk guard and the customer's lock still hold
    when the platform sends no customer id; None if neither says."""
    named = facts.get("customer")
    if isinstance(named, dict) and named.get("id"):
        return str(named["id"])
    for name, value in facts.items():
        if not name.startswith("_") and isinstance(value, dict) and isinstance(value.get("customer_id"), str):
            return str(value["customer_id"])
    return None


def _people(transcript: Sequence[Said], read_back: Found | None) -> dict[str, list[str]]:
    """Who handled the action (kept with it, not shown to the rules), by the messages' ``author``: ``proposer``, the
    analyst who wrote last in the conversation; ``reader``, every analyst who wrote in the turn the customer's yes
    answered (the read-back: anyone who spoke in it may have read it back). An analyst message without an author
    leaves its part unknown (``lifecycle.refusal`` then cannot keep that person out, and the audit says so)."""
    people: dict[str, list[str]] = {}
    proposer = next((s.author for s in reversed(transcript) if s.role == "analyst" and s.author), None)
    if proposer:
        people["proposer"] = [proposer]
    if read_back is not None:
        yes = next((i for i, s in enumerate(transcript) if s.message_id == read_back.source.get("message_id")), None)
        readers: list[str] = []
        for said in reversed(transcript[:yes] if yes is not None else []):
            if said.role == "customer":
                break
            if said.role == "analyst" and said.author and said.author not in readers:
                readers.append(said.author)
        if readers:
            people["reader"] = readers
    return people


def disguise(facts: Mapping[str, Any]) -> tuple[str, ...]:
    """What disguised the text an action was asked for in, as its facts keep it (empty: nothing did)."""
    return Request.from_json(facts.get(REQUEST_KEY)).disguise


def shown(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts as the action keeps them (what the policy was told, with the sources of the systems' answers)."""
    return {k: v for k, v in facts.items() if k != "_refused"}
