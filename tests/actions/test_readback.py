"""A customer's yes confirms only the actions the analyst read back just before it, each by name, amount (as a
number) and what the customer supplied: on the real pipeline against the demo's systems, and the read-back itself
on the demo rulebook."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actions.test_skill import Chat, action_of, vigil
from vigil.actions.readback import ReadBack, amounts, turn
from vigil.actions.reading import Said
from vigil.actions.rulebook import Rulebook
from vigil.testing import Wired

__all__ = ["vigil"]

DEMO = Rulebook.load(Path(__file__).parents[2] / "knowledge" / "rulebooks" / "demo").catalog


def latest(chat: Chat, name: str) -> dict[str, object]:
    return [action_of(c) for c in chat.cards() if action_of(c)["name"] == name][-1]


async def test_a_yes_to_a_refund_read_back_does_not_confirm_a_cancellation_of_the_same_order(vigil: Wired):
    chat = Chat(vigil)
    await chat.say("customer", "please cancel my order ORD-10003")
    await chat.say("analyst", "Thanks, your identity is verified.")
    await chat.say("analyst", "I can refund 39.00 for ORD-10003 instead, ok?")
    await chat.say("customer", "yes")
    cancel = latest(chat, "cancel_order")
    assert (cancel["verdict"], cancel["rule"]) == ("deny", "not_confirmed")

    await chat.say("analyst", "Or I can cancel ORD-10003 for you. Shall I?")
    await chat.say("customer", "yes please")
    cancel = latest(chat, "cancel_order")
    assert (cancel["verdict"], cancel["rule"]) == ("allow", "cancel_pending_order")


async def test_a_read_back_of_112_50_does_not_confirm_a_refund_of_12_50(vigil: Wired):
    chat = Chat(vigil)
    await chat.say("customer", "the cable of ORD-10002 is broken, please refund £12.50")
    await chat.say("analyst", "Thanks, your identity is verified. I can refund 112.50 for ORD-10002, ok?")
    await chat.say("customer", "yes")
    refund = latest(chat, "refund_order")
    assert refund["arguments"]["amount_cents"] == 1250
    assert (refund["verdict"], refund["rule"]) == ("deny", "not_confirmed")

    await chat.say("analyst", "Sorry, I meant a refund of £12.50 for ORD-10002. Is that right?")
    await chat.say("customer", "yes")
    assert latest(chat, "refund_order")["rule"] == "refund_needs_approval"


async def test_one_yes_confirms_each_action_read_back_together(vigil: Wired):
    chat = Chat(vigil, customer="CUS-1002")
    await chat.say("customer", "Please change my email to new@example.com")
    await chat.say("customer", "I've had no internet for three days, I want compensation")
    await chat.say("analyst", "Thanks, your identity is verified.")
    await chat.say("analyst", "I'll change your e-mail to new@example.com")
    await chat.say("analyst", "and add a goodwill credit of £10.00 to your account. Is that all right?")
    await chat.say("customer", "yes")
    email, credit = latest(chat, "change_email"), latest(chat, "issue_credit")
    assert (email["verdict"], email["rule"]) == ("allow", "change_account_details")
    assert (credit["verdict"], credit["rule"]) == ("needs_approval", "credit_needs_approval")


async def test_a_yes_to_something_else_after_the_read_back_confirms_nothing(vigil: Wired):
    chat = Chat(vigil)
    await chat.say("customer", "please refund ORD-10001")
    await chat.say("analyst", "Your identity is verified. I can refund 89.99 for ORD-10001, ok?")
    await chat.say("customer", "hmm, let me think")
    await chat.say("analyst", "Is there anything else I can help with?")
    await chat.say("customer", "yes")
    assert latest(chat, "refund_order")["rule"] == "not_confirmed"


async def test_a_yes_to_an_earlier_refund_does_not_confirm_the_same_refund_asked_for_again(vigil: Wired):
    chat = Chat(vigil)
    await chat.say("customer", "please refund £20 on ORD-10001")
    await chat.say("analyst", "Your identity is verified. I can refund 20.00 for ORD-10001, ok?")
    await chat.say("customer", "yes")
    first = chat.cards()[-1]
    await chat.decide(first, "rejected", by="lee", role="lead", text="not for a used item")
    assert action_of(chat.cards()[-1])["status"] == "rejected"

    await chat.say("customer", "come on, refund £20 on ORD-10001")
    again = latest(chat, "refund_order")
    assert again["action_id"] != action_of(first)["action_id"]
    assert (again["status"], again["rule"]) == ("suggested", "not_confirmed")


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("I can refund 89.99 for ORD-10001, ok?", {8999}),
        ("That's £1,250.00 back, plus £10", {125000, 1000}),
        ("refund 112.50 on ORD-10002 (12 days ago)", {11250, 1200}),
        ("order ORD-10001, account CUS-1001, postcode LS1 4AB", set()),
    ],
)
def test_a_read_back_states_amounts_as_numbers_not_digits_inside_ids(text: str, stated: set[int]):
    assert amounts(text) == stated


def test_a_read_back_names_each_value_as_a_whole_word():
    refund = ReadBack.of(
        DEMO,
        DEMO["refund_order"],
        {"order_id": "ORD-1000", "amount_cents": 1250, "payment_method_id": "PM-5001", "reason": "x"},
        {"order_id": {"source": "message"}, "amount_cents": {"source": "message"}, "payment_method_id": {}},
    )
    assert refund.said_in("I can refund 12.50 for ord-1000, ok?")
    assert not refund.said_in("I can refund 12.50 for ORD-10001, ok?")
    assert not refund.said_in("I can cancel ORD-1000 and give you 12.50 back, ok?")  # not named as a refund


def test_the_analysts_turn_is_what_they_said_since_the_customer_last_spoke():
    said = [
        Said("m1", "customer", "refund please"),
        Said("m2", "analyst", "one"),
        Said("m3", "system", "Priya joined"),
        Said("m4", "analyst", "two"),
        Said("m5", "customer", "yes"),
    ]
    assert turn(said, 4) == "one\ntwo"
    assert turn(said, 1) == ""
