"""The τ²-bench rulebooks (knowledge/rulebooks/tau2-retail, tau2-airline) as a support lead reads them: a few
cases per domain, tricky ones included, each decided through ``Rulebook.decide``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vigil.actions.rulebook import ActionRequest, Rulebook

RULEBOOKS = Path(__file__).resolve().parents[2] / "knowledge" / "rulebooks"


@pytest.fixture(scope="module")
def retail() -> Rulebook:
    return Rulebook.load(RULEBOOKS / "tau2-retail")


@pytest.fixture(scope="module")
def airline() -> Rulebook:
    return Rulebook.load(RULEBOOKS / "tau2-airline")


def _said(rulebook: Rulebook, action: str, args: dict[str, Any], context: dict[str, Any]) -> tuple[str, str]:
    verdict = rulebook.decide(ActionRequest(action=action, args=args, context=context, tenant="tau2"))
    return verdict.outcome, verdict.rule


# ---- retail ------------------------------------------------------------------------------------------------

ME = "yusuf_rossi_9620"
ORDER = {
    "identity_verified": True,
    "confirmed": True,
    "user_id": ME,
    "user_payment_method_ids": ["credit_card_9513926", "gift_card_1111111"],
    "order_user_id": ME,
    "order_status": "delivered",
    "order_item_ids": ["4602305039", "4202497723"],
    "order_payment_method_id": "credit_card_9513926",
    "order_total_cents": 30000,
}
RETURN = {"order_id": "#W2378156", "item_ids": ["4602305039"], "payment_method_id": "credit_card_9513926"}


def test_both_rulebooks_load_with_every_tool_and_a_reason_for_every_rule(retail, airline):
    assert set(retail.catalog) == {
        "cancel_pending_order",
        "modify_pending_order_address",
        "modify_pending_order_payment",
        "modify_pending_order_items",
        "modify_user_address",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
    assert {"book_reservation", "cancel_reservation", "send_certificate"} <= set(airline.catalog)
    for rulebook in (retail, airline):
        assert all(rule.reason for rule in rulebook.policy.rules)
        assert rulebook.policy.actions == set(rulebook.catalog)


def test_a_return_to_the_original_card_or_to_one_of_the_users_gift_cards_passes(retail):
    assert _said(retail, "return_delivered_order_items", RETURN, {**ORDER, "payment_method_source": "credit_card"}) == (
        "allow",
        "return_or_exchange_delivered_order",
    )
    to_gift_card = {**RETURN, "payment_method_id": "gift_card_1111111"}
    assert (
        _said(retail, "return_delivered_order_items", to_gift_card, {**ORDER, "payment_method_source": "gift_card"})[0]
        == "allow"
    )


def test_a_return_to_the_users_paypal_is_refused_as_not_the_original_method(retail):
    args = {**RETURN, "payment_method_id": "paypal_2222222"}
    context = {
        **ORDER,
        "user_payment_method_ids": [*ORDER["user_payment_method_ids"], "paypal_2222222"],
        "payment_method_source": "paypal",
    }
    assert _said(retail, "return_delivered_order_items", args, context) == ("deny", "refund_not_original_or_gift_card")


def test_an_order_whose_items_were_modified_can_no_longer_be_changed_or_cancelled(retail):
    context = {**ORDER, "order_status": "pending (item modified)"}
    address = {
        "order_id": "#W2378156",
        "address1": "1 Main St",
        "address2": "",
        "city": "Austin",
        "state": "TX",
        "country": "USA",
        "zip": "78701",
    }
    assert _said(retail, "modify_pending_order_address", address, context) == ("deny", "modify_only_pending")
    cancel = {"order_id": "#W2378156", "reason": "ordered by mistake"}
    assert _said(retail, "cancel_pending_order", cancel, context) == ("deny", "cancel_only_pending")


def test_a_cancellation_takes_only_the_two_reasons_the_policy_allows(retail):
    pending = {**ORDER, "order_status": "pending"}
    assert (
        _said(retail, "cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}, pending)[0]
        == "allow"
    )
    assert _said(retail, "cancel_pending_order", {"order_id": "#W2378156", "reason": "too slow"}, pending) == (
        "deny",
        "cancel_reason_not_allowed",
    )


def test_identity_comes_before_everything_even_on_the_users_own_order(retail):
    context = {**ORDER, "identity_verified": False, "order_user_id": "someone_else_0001"}
    assert _said(retail, "return_delivered_order_items", RETURN, context) == ("deny", "identity_not_verified")


def test_a_gift_card_needs_the_whole_difference_but_a_refund_needs_nothing(retail):
    args = {
        "order_id": "#W2378156",
        "item_ids": ["4602305039"],
        "new_item_ids": ["9999999999"],
        "payment_method_id": "gift_card_1111111",
    }
    swap = {
        **ORDER,
        "payment_method_source": "gift_card",
        "gift_card_balance_cents": 1700,
        "new_items_same_product": True,
        "new_items_differ": True,
        "new_items_available": True,
    }
    assert _said(retail, "exchange_delivered_order_items", args, {**swap, "price_difference_cents": 2110}) == (
        "deny",
        "gift_card_balance_short",
    )
    assert _said(retail, "exchange_delivered_order_items", args, {**swap, "price_difference_cents": -500})[0] == "allow"


def test_a_missing_fact_refuses_the_action_naming_the_rule_that_needed_it(retail):
    context = {k: v for k, v in ORDER.items() if k != "order_status"} | {"payment_method_source": "credit_card"}
    assert _said(retail, "return_delivered_order_items", RETURN, context) == ("deny", "return_only_delivered")


# ---- airline -----------------------------------------------------------------------------------------------

FLIGHTS = [{"flight_number": "HAT005", "date": "2024-05-20"}, {"flight_number": "HAT178", "date": "2024-05-30"}]
RESERVATION = {
    "identity_verified": True,
    "confirmed": True,
    "user_id": "daiki_muller_1116",
    "membership": "silver",
    "user_payment_ids": ["credit_card_2408938", "gift_card_1234567", "certificate_7654321"],
    "reservation_user_id": "daiki_muller_1116",
    "reservation_status": "active",
    "reservation_cabin": "basic_economy",
    "reservation_flights": FLIGHTS,
    "reservation_origin": "LAX",
    "reservation_destination": "ATL",
    "reservation_flight_type": "round_trip",
    "reservation_passenger_count": 2,
    "reservation_total_baggages": 0,
    "reservation_insurance": False,
    "minutes_since_booking": 14 * 24 * 60,
    "flown": False,
    "airline_cancelled": False,
    "delayed": False,
    "cancellation_reason": "change_of_plan",
}
CHANGE = {
    "new_origin": "LAX",
    "new_end": "LAX",
    "new_airports": ["ATL", "LAX"],
    "new_flights_bookable": True,
    "payment_source": "credit_card",
    "price_difference_cents": 80000,
}


def test_basic_economy_may_change_cabin_but_not_its_flights(airline):
    upgrade = {"reservation_id": "XEHM4B", "cabin": "business", "flights": FLIGHTS, "payment_id": "credit_card_2408938"}
    assert _said(airline, "update_reservation_flights", upgrade, RESERVATION | CHANGE)[0] == "allow"
    later = [FLIGHTS[0], {"flight_number": "HAT178", "date": "2024-05-29"}]
    assert _said(airline, "update_reservation_flights", {**upgrade, "flights": later}, RESERVATION | CHANGE) == (
        "deny",
        "basic_economy_flights_fixed",
    )


def test_a_cancellation_needs_one_of_the_four_grounds(airline):
    cancel = {"reservation_id": "XEHM4B"}
    assert _said(airline, "cancel_reservation", cancel, RESERVATION) == ("deny", "cancel_not_eligible")
    assert _said(airline, "cancel_reservation", cancel, {**RESERVATION, "reservation_cabin": "business"})[0] == "allow"
    assert _said(airline, "cancel_reservation", cancel, {**RESERVATION, "minutes_since_booking": 23 * 60})[0] == "allow"
    insured = {**RESERVATION, "reservation_insurance": True}
    assert _said(airline, "cancel_reservation", cancel, insured) == ("deny", "cancel_not_eligible")
    assert _said(airline, "cancel_reservation", cancel, {**insured, "cancellation_reason": "health"})[0] == "allow"
    flown = {**RESERVATION, "reservation_cabin": "business", "flown": True}
    assert _said(airline, "cancel_reservation", cancel, flown) == ("deny", "cancel_after_flown")


def test_the_free_bag_allowance_follows_membership_and_cabin(airline):
    bags = {"reservation_id": "YAX4DR", "total_baggages": 6, "nonfree_baggages": 0, "payment_id": "credit_card_2408938"}
    gold_economy = {
        **RESERVATION,
        "membership": "gold",
        "reservation_cabin": "economy",
        "payment_source": "credit_card",
    }
    assert _said(airline, "update_reservation_baggages", bags, gold_economy)[0] == "allow"  # 2 x 3 free
    assert _said(airline, "update_reservation_baggages", {**bags, "total_baggages": 7}, gold_economy) == (
        "deny",
        "free_bags_over_allowance",
    )
    assert (
        _said(
            airline, "update_reservation_baggages", {**bags, "total_baggages": 7, "nonfree_baggages": 1}, gold_economy
        )[0]
        == "allow"
    )


def test_the_number_of_passengers_never_changes(airline):
    one = [{"first_name": "Omar", "last_name": "Rossi", "dob": "1970-06-06"}]
    context = {**RESERVATION, "passenger_count": 1}
    assert _said(
        airline, "update_reservation_passengers", {"reservation_id": "FQ8APE", "passengers": one}, context
    ) == ("deny", "passenger_count_changed")


def test_a_certificate_for_a_cancelled_flight_waits_for_a_lead_and_is_capped_by_passengers(airline):
    complaint = {
        **RESERVATION,
        "compensation_requested": True,
        "complaint": "cancelled_flight",
        "airline_cancelled": True,
        "reservation_changed": False,
    }
    assert _said(airline, "send_certificate", {"user_id": "daiki_muller_1116", "amount_cents": 20000}, complaint) == (
        "needs_approval",
        "certificate_as_gesture",
    )
    assert _said(airline, "send_certificate", {"user_id": "daiki_muller_1116", "amount_cents": 20100}, complaint) == (
        "deny",
        "certificate_over_amount",
    )
    regular = {**complaint, "membership": "regular"}
    assert _said(airline, "send_certificate", {"user_id": "daiki_muller_1116", "amount_cents": 10000}, regular) == (
        "deny",
        "compensation_not_eligible",
    )
    delayed = {**complaint, "complaint": "delayed_flight", "airline_cancelled": False, "delayed": True}
    assert _said(airline, "send_certificate", {"user_id": "daiki_muller_1116", "amount_cents": 10000}, delayed) == (
        "deny",
        "delay_compensation_before_change",
    )


def test_money_is_cents_so_a_dollar_amount_with_decimals_is_refused(airline):
    verdict = airline.decide(
        ActionRequest(
            action="send_certificate", args={"user_id": "daiki_muller_1116", "amount": 100.5}, context=RESERVATION
        )
    )
    assert (verdict.outcome, verdict.rule) == ("deny", "invalid_arguments")
