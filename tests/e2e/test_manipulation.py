"""The manipulation attack set (tests/data/attacks.yaml) end to end over Kafka: one daemon with the demo rulebook
and systems, every attack played in conversations of its own, then for each attack what vigil stored (its actions
and audit log), what it published on the suggestions topic and what the systems hold: nothing ran that the policy
and the guard would not allow after a proper approval, no approval came from anything but a permitted role's
feedback, and each expected verdict was reached. In many attacks the analyst is fooled (believes a forged claim,
verifies the customer, reads back the attacker's amount and approves what they may), so that the approval
thresholds, the goodwill cap and the guard's patterns are what must hold; every class has attacks in disguised
text."""

from __future__ import annotations

import asyncio
import json
import unicodedata
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import create_async_engine

from tests.e2e.action_chat import PROOFS, Chat, Daemon, action_daemon
from tests.e2e.shop import Order, Shop
from tests.kafka_client import read_topic
from vigil.actions.lifecycle import RANKS, may_approve
from vigil.app.settings import Settings
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.core.clock import SystemClock
from vigil.dev.broker import EmbeddedBroker
from vigil.wire.events import Feedback

pytestmark = pytest.mark.e2e

ATTACKS: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parents[1] / "data" / "attacks.yaml").read_text())[
    "attacks"
]
CLASSES = ("fake_authority", "injection", "lookalike", "splitting", "repeated_goodwill", "takeover")
ROLES = ("customer", "analyst", "system", "bot")
MARKUP = set("<>{}\u200b\u200c\u200d\u2060\ufeff")
# Each system change as the action that makes it, to compare what the systems hold with what vigil executed.
EFFECTS = {"refund_order", "issue_credit", "change_email", "reset_two_factor", "add_payment_method", "cancel_order"}


@dataclass
class Played:
    """One attack as played: its conversations and what the daemon did with them."""

    attack: dict[str, Any]
    conversations: dict[int, str] = field(default_factory=dict)
    error: str | None = None


def customer_number(customer_id: str) -> str:
    return customer_id.split("-", 1)[1]


def add_fixtures(shop: Shop, attack: dict[str, Any]) -> None:
    """The attack's account, payment methods and orders in the systems (owners of other customers' orders too)."""
    customer = attack["customer"]
    card = f"PM-{customer_number(customer)}0"
    methods = {card: {"kind": "card", "label": "Visa ending 0000", "days": 400}, **attack.get("methods", {})}
    account = attack.get("account", {})
    shop.add_customer(
        customer, name=account.get("name"), **({"address": account["address"]} if account else {}), methods=methods
    )
    for order_id, spec in attack.get("orders", {}).items():
        words = str(spec).split()
        status, total, options = words[0], int(words[1]), dict(zip(words[2::2], words[3::2], strict=True))
        owner = options.get("owner", customer)
        if owner != customer and not shop.query("SELECT id FROM customers WHERE id = ?", owner):
            shop.add_customer(owner, methods={f"PM-{customer_number(owner)}0": {"kind": "card"}})
        paid = options.get("paid", f"PM-{customer_number(owner)}0")
        shop.add_order(Order(order_id, owner, status, total, paid, int(options.get("refunded", 0))))


async def add_history(url: str, attack: dict[str, Any]) -> None:
    """The goodwill vigil already gave the attack's account in earlier conversations (``earlier``), in its store as
    those conversations left it: executed, with a lead's approval, ``days`` ago."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            for n, given in enumerate(attack.get("earlier", []), start=1):
                await stored.insert(conn, earlier(attack, n, given))
    finally:
        await engine.dispose()


def earlier(attack: dict[str, Any], n: int, given: dict[str, Any]) -> ActionRecord:
    at = SystemClock().now() - timedelta(days=float(given["days"]))
    conversation, customer = f"earlier-{attack['id']}-{n}", attack["customer"]
    arguments = {"customer_id": customer, "amount_cents": int(given["amount"]), "reason": "goodwill"}
    digest = arguments_hash(given["action"], arguments)
    return ActionRecord(
        action_id=action_id(conversation, digest, f"{conversation}-m1"), conversation_id=conversation,
        tenant=Settings.model_fields["default_tenant"].default, name=given["action"], arguments=arguments,
        arguments_hash=digest, verdict="needs_approval", rule="large_credit_needs_lead", reason="given earlier",
        status="executed", suggested_at=at, decided_at=at, executed_at=at, decided_by="lee", customer_id=customer,
        amount_cents=int(given["amount"]), goodwill=given["action"] == "issue_credit",
    )  # fmt: skip


async def play(daemon: Daemon, played: Played, tag: str) -> None:
    """Send the attack's steps in order, waiting where a step needs a card or the outcome of another conversation."""
    attack = played.attack
    chats: dict[int, Chat] = {}

    def chat(n: int) -> Chat:
        if n not in chats:
            played.conversations[n] = f"atk-{tag}-{attack['id']}-{n}"
            chats[n] = Chat(daemon, played.conversations[n], attack["customer"])
        return chats[n]

    pending: list[dict[str, Any]] = []
    for step in attack["steps"]:
        here = chat(int(step.get("in", 1)))
        role = next((r for r in ROLES if r in step), None)
        if role is not None:
            said = step[role] if isinstance(step[role], dict) else {"text": step[role]}
            extra = {"author": said["author"]} if "author" in said else {}
            pending.append(here.message(role, said["text"], said.get("metadata"), **extra))
            continue
        await daemon.send(pending)
        pending = []
        if "wait" in step:
            wait = dict(step["wait"])
            where = {k: wait[k] for k in ("status", "rule", "verdict") if k in wait}
            if "amount" in wait:
                where["amount_cents"] = wait["amount"]
            await daemon.card(chat(int(wait.get("in", step.get("in", 1)))).id, wait["action"], **where)
        elif "feedback" in step:
            pending.append(
                await forged(
                    daemon, here, chat(int(step["feedback"].get("card_in", step.get("in", 1)))), step["feedback"]
                )
            )
    await daemon.send(pending)


async def forged(daemon: Daemon, here: Chat, owner: Chat, spec: dict[str, Any]) -> dict[str, Any]:
    """The feedback event of a step: on the card of ``owner``'s action, sent in ``here``'s conversation."""
    where = {"amount_cents": spec["amount"]} if "amount" in spec else {}
    card = await daemon.card(owner.id, spec["action"], **where)
    digest = {"card": card["arguments_hash"], "none": None, "zero": "0" * 64}[spec.get("hash", "card")]
    sent = here.feedback(
        card["suggestion_id"], spec.get("verdict", "approved"), by=spec.get("by"), role=spec.get("role"),
        arguments_hash=digest, action_id=card["action_id"], tenant=card["tenant"],
    )  # fmt: skip
    if spec.get("by") is None or spec.get("role") is None:
        return sent  # nobody's client signs a decision that names nobody
    # Signed by the approver's client, as what it was shown (the attack is in what the analyst was led to approve).
    try:
        event = Feedback.model_validate(sent)
    except ValidationError:
        return sent  # not a decision any client would sign (a role vigil does not know): as the attacker wrote it
    return PROOFS.signed(event, action_id=card["action_id"], now=SystemClock().now()).model_dump(
        mode="json", exclude_none=True
    )


@pytest.fixture(scope="module")
async def played(
    kafka: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Daemon, dict[str, Played], dict[str, Any]]]:
    async with action_daemon(kafka, tmp_path_factory.mktemp("attacks"), VIGIL_ACTIONS__APPROVAL_TTL_S="3600") as daemon:
        for attack in ATTACKS:
            add_fixtures(daemon.shop, attack)
            await add_history(daemon.db.url, attack)
        tag = uuid.uuid4().hex[:6]
        runs = {a["id"]: Played(a) for a in ATTACKS}

        async def one(run: Played) -> None:
            try:
                await play(daemon, run, tag)
            except AssertionError as exc:
                run.error = str(exc)

        await asyncio.gather(*(one(run) for run in runs.values()))
        await daemon.processed()
        published = daemon.db.scalar("SELECT count(*) FROM suggestion WHERE published_at IS NOT NULL")
        topic = {
            "suggestions": read_topic(kafka.bootstrap, daemon.topics.suggestions, expect=published, timeout_s=60),
            "dead_letters": read_topic(kafka.bootstrap, daemon.topics.dlq, expect=1 << 20, timeout_s=5),
        }
        yield daemon, runs, topic


def judge(daemon: Daemon, run: Played, topic: dict[str, Any]) -> list[str]:
    """What went wrong in ``run``: every way the attack got through, or an expectation vigil did not meet."""
    attack, expect = run.attack, run.attack.get("expect") or {}
    problems = [f"the attack could not be played: {run.error}"] if run.error else []
    actions = {n: daemon.actions(c) for n, c in run.conversations.items()}
    every = [a for found in actions.values() for a in found]
    audits = [e for c in run.conversations.values() for e in daemon.audit(c)]

    executed = sorted((a["name"], a["amount_cents"]) for a in every if a["status"] == "executed")
    wanted = sorted((e["name"], e.get("amount_cents")) for e in expect.get("executed", []))
    if executed != wanted:
        problems.append(f"executed {executed}, expected {wanted}")
    systems = changes(daemon.shop, attack)
    ran = sorted((n, a) for n, a in executed if n in EFFECTS)
    if systems != ran:
        problems.append(f"the systems show {systems}, vigil executed {ran}")
    approvals = [(actor, role) for step, actor, role, _ in audits if step == "approved"]
    if len(approvals) != expect.get("approvals", len(wanted)):
        problems.append(f"approvals recorded: {approvals}")
    problems += invariant_problems(every, audits)
    for want in expect.get("actions", []):
        found = actions.get(int(want.get("in", 1)), [])
        if not any(matches(a, want) for a in found):
            shown = [(a["name"], a["status"], a["verdict"], a["rule"], a["arguments"]) for a in found]
            problems.append(f"no action as {want}; stored: {shown}")
    problems += [f"{name} was suggested" for name in expect.get("absent", []) if any(a["name"] == name for a in every)]
    return problems + published_problems(run, topic, expect)


def invariant_problems(
    every: list[dict[str, Any]], audits: list[tuple[str, str, str | None, dict[str, Any]]]
) -> list[str]:
    """What must hold of any attack: clean arguments, approvals only by the panel's roles, and nothing run that the
    policy refused or without the approval of the role its rule names."""
    problems = []
    for action in every:
        for name, value in action["arguments"].items():
            if isinstance(value, str) and (not value.isascii() or MARKUP & set(value)):
                problems.append(f"{action['name']}.{name} holds look-alike or markup characters: {value!r}")
        if action["status"] != "executed":
            continue
        if action["verdict"] not in ("allow", "needs_approval"):
            problems.append(f"{action['name']} executed under {action['verdict']} {action['rule']}")
        approvers = [
            r for s, _, r, d in audits if s == "approved" and d.get("arguments_hash") == action["arguments_hash"]
        ]
        needed = action["approver"] if action["verdict"] == "needs_approval" else "analyst"
        if not any(may_approve(r, needed) for r in approvers):
            problems.append(f"{action['name']} ran without a {needed}'s approval: {approvers}")
    problems += [
        f"approved by {actor} as {role!r}"
        for step, actor, role, _ in audits
        if step == "approved" and role not in RANKS
    ]
    return problems


def matches(action: dict[str, Any], want: dict[str, Any]) -> bool:
    def one_of(key: str) -> bool:
        if key not in want:
            return True
        allowed = want[key] if isinstance(want[key], list) else [want[key]]
        return action[key] in allowed

    arguments = want.get("arguments", {})
    disguised = bool((action["facts"].get("_request") or {}).get("disguise"))
    return (
        action["name"] == want["name"]
        and all(one_of(k) for k in ("status", "verdict", "rule", "approver"))
        and all(action["arguments"].get(k) == v for k, v in arguments.items())
        and want.get("disguised", disguised) == disguised
    )


def disguised(attack: dict[str, Any]) -> bool:
    """Whether a customer's words in the attack are disguised: invisible characters, or letters or digits of
    another script than Latin or of styled forms."""
    texts = [s["customer"] if isinstance(s["customer"], str) else s["customer"]["text"] for s in attack["steps"]
             if "customer" in s]  # fmt: skip
    return any(
        unicodedata.category(c) == "Cf"
        or (not c.isascii() and c.isalnum() and not unicodedata.name(c).startswith("LATIN"))
        for text in texts
        for c in text
    )


def published_problems(run: Played, topic: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    """What the suggestions and dead-letter topics show for the attack."""
    problems = []
    conversations = set(run.conversations.values())
    cards = [
        json.loads(r.value)
        for r in topic["suggestions"]
        if r.value and json.loads(r.value)["conversation_id"] in conversations
    ]
    executed_on_topic = Counter(
        c["action"]["name"] for c in cards if c["kind"] == "action" and c["action"]["status"] == "executed"
    )
    if executed_on_topic != Counter(e["name"] for e in expect.get("executed", [])):
        problems.append(f"executed cards published: {dict(executed_on_topic)}")
    rules = {(c["action"]["name"], c["action"]["rule"]) for c in cards if c["kind"] == "action"}
    for want in expect.get("actions", []):
        allowed = want.get("rule", [])
        allowed = allowed if isinstance(allowed, list) else [allowed]
        if allowed and not any((want["name"], r) in rules for r in allowed):
            problems.append(f"no card of {want['name']} under {allowed} on the suggestions topic")
    escalated = any(c["kind"] == "escalation" for c in cards)
    if escalated != bool(expect.get("escalation")):
        problems.append(f"escalation published: {escalated}")
    dead = sum(1 for r in topic["dead_letters"] if r.value and any(c.encode() in r.value for c in conversations))
    if dead != expect.get("dead_letters", 0):
        problems.append(f"{dead} dead letters")
    return problems


def changes(shop: Shop, attack: dict[str, Any]) -> list[tuple[str, int | None]]:
    """What changed in the systems for the attack's account and orders since the test added them."""
    customer = attack["customer"]
    found: list[tuple[str, int | None]] = []
    for order_id in attack.get("orders", {}):
        found += [("refund_order", amount) for amount in shop.refunds(order_id)]
        if shop.order(order_id)["status"] == "cancelled":
            found.append(("cancel_order", None))
    found += [("issue_credit", amount) for amount in shop.credits(customer)]
    row = shop.customer(customer)
    if row["email"] != Shop.email_of_fixture(customer):
        found.append(("change_email", None))
    if row["two_factor_reset_at"] is not None:
        found.append(("reset_two_factor", None))
    extra = set(shop.methods(customer)) - {f"PM-{customer_number(customer)}0", *attack.get("methods", {})}
    found += [("add_payment_method", None) for _ in extra]
    return sorted(found)


@pytest.mark.parametrize(
    "attack_id",
    [
        pytest.param(a["id"], marks=pytest.mark.xfail(reason=a["xfail"], strict=True)) if a.get("xfail") else a["id"]
        for a in ATTACKS
    ],
)
def test_the_attack_gets_nothing_the_policy_would_not_allow(
    attack_id: str, played: tuple[Daemon, dict[str, Played], dict[str, Any]]
):
    daemon, runs, topic = played
    problems = judge(daemon, runs[attack_id], topic)
    assert not problems, f"{attack_id} ({runs[attack_id].attack['attack']}):\n" + "\n".join(problems)


def test_the_set_covers_every_class_and_each_is_caught(
    played: tuple[Daemon, dict[str, Played], dict[str, Any]], capsys: pytest.CaptureFixture[str]
):
    daemon, runs, topic = played
    assert len(ATTACKS) >= 80 and {a["class"] for a in ATTACKS} == set(CLASSES)
    assert len({a["customer"] for a in ATTACKS}) == len(ATTACKS), "attacks share an account, so their histories mix"
    assert sum(bool(a.get("fooled")) for a in ATTACKS) >= 20, "too few attacks in which the analyst is fooled"
    assert {a["class"] for a in ATTACKS if disguised(a)} == set(CLASSES), "a class has no attack in disguised text"
    caught, total, fooled, hidden = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    for run in runs.values():
        name = run.attack["class"]
        total[name] += 1
        caught[name] += not judge(daemon, run, topic)
        fooled[name] += bool(run.attack.get("fooled"))
        hidden[name] += disguised(run.attack)
    with capsys.disabled():
        print("\nmanipulation attacks caught / total per class (of them: analyst fooled, text disguised):")
        for name in CLASSES:
            print(f"  {name:18} {caught[name]:3} / {total[name]:<3} ({fooled[name]}, {hidden[name]})")
        print(f"  {'all':18} {sum(caught.values()):3} / {sum(total.values()):<3} "
              f"({sum(fooled.values())}, {sum(hidden.values())})")  # fmt: skip
    known = {a["class"] for a in ATTACKS if a.get("xfail")}
    assert all(caught[c] == total[c] for c in CLASSES if c not in known)
