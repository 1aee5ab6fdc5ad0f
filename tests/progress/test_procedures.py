"""Procedures mined from resolved conversations, and where a running case stands in one."""

from __future__ import annotations

import json

from vigil.progress.procedures import (
    START,
    MiningSettings,
    Procedure,
    Turn,
    history,
    identify,
    locate,
    mine,
    next_steps,
    skipped,
)


def c(text: str) -> Turn:
    return Turn("customer", text)


def a(text: str, step: str | None = None) -> Turn:
    return Turn("analyst", text, step)


def password_reset(verified_by: str = "verify_identity") -> list[Turn]:
    return [
        c("I can't log in, I forgot my password"),
        a("Hello, can you confirm your email address and date of birth?", verified_by),
        c("jo@example.com, 1 May 1990"),
        a("Thanks, I have sent a password reset link to your email.", "send_reset_link"),
        c("got it, thanks"),
        a("Is there anything else I can help with?", "anything_else"),
    ]


def refund() -> list[Turn]:
    return [
        c("my order arrived broken, I want a refund"),
        a("Sorry to hear that! What is your order number?", "ask_order"),
        c("order 12345"),
        a("I have issued a refund of 20 dollars for order 12345.", "issue_refund"),
        c("thank you"),
        a("Is there anything else I can help with?", "anything_else"),
    ]


def mined() -> dict[str, Procedure]:
    return mine([("password", password_reset())] * 4 + [("refund", refund())] * 3)


def test_mining_counts_each_transition_from_the_start_and_between_steps():
    procedures = mine([("password", password_reset())] * 3 + [("password", password_reset()[:4])])
    p = procedures["password"]
    assert p.cases == 4
    assert p.transitions[START] == {"verify_identity": 4}
    assert p.transitions["verify_identity"] == {"send_reset_link": 4}
    assert p.transitions["send_reset_link"] == {"anything_else": 3}
    assert p.steps["send_reset_link"].count == 4


def test_the_template_is_the_reply_sent_most_often():
    conversations = [
        ("refund", [c("refund please"), a("What is your order number?", "ask_order")]),
        ("refund", [c("refund please"), a("What is your order number?", "ask_order")]),
        ("refund", [c("refund please"), a("Could you tell me the number of your order, please?", "ask_order")]),
    ]
    step = mine(conversations)["refund"].steps["ask_order"]
    assert step.template == "What is your order number?"
    assert step.examples[0] == "What is your order number?"
    assert len(step.examples) == 2


def test_a_procedure_survives_a_round_trip_through_json():
    p = mined()["password"]
    again = Procedure.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again == p


def test_the_procedure_is_identified_from_the_customers_words():
    name, confidence = identify(mined(), [c("hi, my order came broken and I'd like a refund")])
    assert name == "refund"
    assert confidence > 0.5


def test_a_category_the_platform_sends_is_taken_as_given():
    turns = [c("hi, my order came broken and I'd like a refund")]
    assert identify(mined(), turns, category="password") == ("password", 1.0)


def test_an_unknown_category_falls_back_on_the_text():
    name, _ = identify(mined(), [c("I forgot my password and cannot log in")], category="billing")
    assert name == "password"


def test_the_next_step_follows_the_mined_order_and_carries_the_template():
    p = mined()["refund"]
    ranked = next_steps(p, refund()[:3], k=3)
    assert ranked[0].label == "issue_refund"
    assert ranked[0].template == "I have issued a refund of 20 dollars for order 12345."
    assert [s.probability for s in ranked] == sorted((s.probability for s in ranked), reverse=True)
    assert len(ranked) == 3


def test_what_the_customer_just_said_decides_between_branches():
    def case(answer: str, reply: str, step: str) -> list[Turn]:
        return [
            c("book me a table"),
            a("Shall I confirm the booking?", "ask_confirm"),
            c(answer),
            a(reply, step),
        ]

    procedures = mine(
        [("booking", case("yes please go ahead", "Booked!", "booked"))] * 5
        + [("booking", case("no thanks, I changed my mind", "Cancelled.", "cancelled"))] * 4
    )
    p = procedures["booking"]
    asked = case("", "", "")[:2]
    assert next_steps(p, [*asked, c("no, I changed my mind")])[0].label == "cancelled"
    assert next_steps(p, [*asked, c("yes go ahead")])[0].label == "booked"


def test_an_unlabelled_reply_is_located_at_the_step_it_resembles():
    p = mined()["password"]
    turns = [c("forgot my password"), a("Can you confirm your email address and date of birth please?")]
    assert locate(p, turns) == "verify_identity"
    assert locate(p, [c("forgot my password")]) is None


def test_without_labels_analyst_turns_are_clustered_into_steps():
    unlabelled = [[Turn(t.role, t.text) for t in password_reset()] for _ in range(4)]
    p = mine([("password", conv) for conv in unlabelled])["password"]
    assert len(p.steps) == 3
    assert all(label.startswith("step") for label in p.steps)
    first = p.transitions[START]
    (opening,) = first
    assert p.steps[opening].template == "Hello, can you confirm your email address and date of birth?"
    assert history(p, unlabelled[0])[:2] == [opening, next(iter(p.transitions[opening]))]


def test_a_conversation_without_a_category_joins_the_procedure_it_resembles():
    procedures = mine([*[("password", password_reset())] * 3, ("refund", refund()), (None, refund())])
    assert procedures["refund"].cases == 2
    assert set(procedures) == {"password", "refund"}


def test_a_step_that_always_came_first_is_required_and_flagged_when_skipped():
    procedures = mine([("password", password_reset())] * 5, MiningSettings(require_support=5))
    p = procedures["password"]
    assert p.requires["send_reset_link"] == ["verify_identity"]
    skipping = [c("I forgot my password"), a("Hi!", "greet")]
    assert skipped(p, skipping, "send_reset_link") == ["verify_identity"]
    assert skipped(p, password_reset()[:2], "send_reset_link") == []


def test_nothing_is_required_before_a_step_seen_too_rarely():
    p = mine([("password", password_reset())] * 4, MiningSettings(require_support=5))["password"]
    assert p.requires == {}
