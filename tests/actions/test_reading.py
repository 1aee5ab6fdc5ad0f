"""A refund asked for in parts in one message is one request for the total: the card, the policy and the
conjunctive-risk guard see what the customer asked for altogether, with each part shown where it came from; on the
real pipeline against the demo's systems, and the reading itself."""

from __future__ import annotations

from pathlib import Path

from tests.actions.systems import Shop
from tests.actions.test_skill import Chat, action_of, vigil
from vigil.actions.reading import Said, read_arguments
from vigil.actions.rulebook import Rulebook
from vigil.testing import Wired

__all__ = ["vigil"]

REFUND = Rulebook.load(Path(__file__).parents[2] / "knowledge" / "rulebooks" / "demo").catalog["refund_order"]


async def test_a_refund_asked_for_in_parts_is_one_refund_of_the_total_that_a_lead_approves(vigil: Wired):
    chat = Chat(vigil)
    await chat.say(
        "customer", "on ORD-10002 please refund £40 for the keyboard and £45 for the cable and £50 for the other"
    )
    [card] = chat.cards()
    action = action_of(card)
    assert action["arguments"]["amount_cents"] == 13500
    assert action["provenance"]["amount_cents"]["parts"] == [
        {"quote": "£40", "cents": 4000}, {"quote": "£45", "cents": 4500}, {"quote": "£50", "cents": 5000},
    ]  # fmt: skip
    assert card.text.startswith("Refund £135.00 on order ORD-10002.")

    await chat.say("analyst", "Your identity is verified. I can refund 135.00 for ORD-10002 altogether, ok?")
    await chat.say("customer", "yes")
    action = action_of(chat.cards()[-1])
    assert (action["verdict"], action["rule"], action["approver"]) == (
        "needs_approval", "large_refund_needs_lead", "lead",
    )  # fmt: skip


async def test_the_guard_counts_a_refund_asked_for_in_parts_at_its_total(vigil: Wired, shop: Shop):
    chat = Chat(vigil)
    await chat.say("customer", "please refund £10 on ORD-10002, a key is missing")
    await chat.say("analyst", "Your identity is verified. I can refund 10.00 for ORD-10002, ok?")
    await chat.say("customer", "yes")
    first = chat.cards()[-1]
    await chat.decide(first, "approved", by="ana", role="analyst", arguments_hash=action_of(first)["arguments_hash"])
    assert shop.refunds("ORD-10002")[-1] == 1000

    # £20 + £25 = £45, with the £10 already refunded £55 on the order: one refund split into small ones.
    await chat.say("customer", "and refund £20 for the cable and £25 for the stand on ORD-10002")
    action = action_of(chat.cards()[-1])
    assert action["arguments"]["amount_cents"] == 4500
    assert (action["status"], action["rule"]) == ("blocked", "refund_splitting_order")


def test_every_amount_a_message_names_is_added_and_one_alone_is_read_as_written():
    said = [
        Said("m1", "customer", "please refund £12.50 on ORD-10002, it cost £30 new"),
        Said("m2", "customer", "thanks"),
    ]
    reading = read_arguments(REFUND, said, {"order": {"payment_method_id": "PM-5001"}})
    assert reading.arguments["amount_cents"] == 4250  # every amount the newest message naming any names, added up
    said = [Said("m1", "customer", "please refund 12.50 on ORD-10002")]
    reading = read_arguments(REFUND, said, {"order": {"payment_method_id": "PM-5001"}})
    assert reading.arguments["amount_cents"] == 1250
    assert reading.provenance["amount_cents"] == {
        "source": "message",
        "message_id": "m1",
        "role": "customer",
        "quote": "12.50",
    }
