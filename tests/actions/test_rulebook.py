"""A rulebook decides an action request: arguments checked against their schema, then the policy asked, hard rules
before the preconditions that wait for the conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil.actions.rulebook import ActionRequest, Rulebook

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"
ORDER = {
    "customer_id": "CUS-1001",
    "status": "delivered",
    "total_cents": 27900,
    "refundable_cents": 27900,
    "payment_method_id": "PM-5001",
}
REFUND = {"order_id": "ORD-10001", "amount_cents": 1500, "payment_method_id": "PM-5001", "reason": "damaged"}


@pytest.fixture(scope="module")
def demo() -> Rulebook:
    return Rulebook.load(RULEBOOKS / "demo")


def decided(demo: Rulebook, args: dict[str, object], **context: object) -> tuple[str, str]:
    verdict = demo.decide(ActionRequest(action="refund_order", args=args, context=context, tenant="brightwave"))
    return verdict.outcome, verdict.rule


@pytest.mark.parametrize(
    ("args", "order", "rule"),
    [
        (REFUND, ORDER | {"customer_id": "CUS-1002"}, "order_of_another_customer"),
        (REFUND | {"amount_cents": 50000}, ORDER, "refund_over_remaining"),
    ],
    ids=["another-customers-order", "500-on-a-279-order"],
)
def test_a_refund_no_conversation_can_make_right_is_refused_by_its_rule_before_identity_or_a_yes(
    demo: Rulebook, args: dict[str, object], order: dict[str, object], rule: str
):
    customer = {"id": "CUS-1001"}
    assert decided(demo, args, identity_verified=False, confirmed=False, customer=customer, order=order) == (
        "deny",
        rule,
    )


def test_a_refund_the_rules_allow_waits_for_the_identity_check_then_the_yes(demo: Rulebook):
    customer = {"id": "CUS-1001"}
    assert decided(demo, REFUND, identity_verified=False, confirmed=False, customer=customer, order=ORDER) == (
        "deny",
        "identity_not_verified",
    )
    assert decided(demo, REFUND, identity_verified=True, confirmed=False, customer=customer, order=ORDER) == (
        "deny",
        "not_confirmed",
    )
    assert decided(demo, REFUND, identity_verified=True, confirmed=True, customer=customer, order=ORDER) == (
        "needs_approval",
        "refund_needs_approval",
    )
