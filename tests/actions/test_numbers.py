"""Numbers reach the rules as their field declares them: a whole ``2.0`` is a whole number in an ``integer`` field,
any number is a Cedar decimal in a ``number`` field, and money stays integer cents."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil.actions.catalog import ActionSpec
from vigil.actions.numbers import for_rules
from vigil.actions.rulebook import ActionRequest, Rulebook
from vigil.core.errors import InvalidArguments

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"

ACTIONS = """
actions:
  ship_parcel:
    description: Ship a parcel at a price.
    amount: price_cents
    arguments:
      type: object
      required: [parcels, weight_kg, price_cents]
      properties:
        parcels: {type: integer, minimum: 1}
        weight_kg: {type: number, exclusiveMinimum: 0}
        price_cents: {type: integer, minimum: 0}
        legs: {type: array, items: {$ref: "#/$defs/leg"}}
      $defs:
        leg: {type: object, properties: {km: {type: number}, stops: {type: integer}}}
"""
POLICY = """
@id("too_many_parcels") @reason("Ten parcels at most.")
forbid(principal, action, resource) when { context.args.parcels > 10 };

@id("too_heavy") @reason("Thirty kilos at most.")
forbid(principal, action, resource) when { context.args.weight_kg.greaterThan(decimal("30.0")) };

@id("long_leg") @reason("No leg over 500 km.")
forbid(principal, action, resource)
when { context.args has legs && context.args.legs.contains({km: decimal("600.5"), stops: 2}) };

@id("ship") @reason("Parcels may be shipped.")
permit(principal, action == Action::"ship_parcel", resource);
"""


@pytest.fixture(scope="module")
def shipping(tmp_path_factory: pytest.TempPathFactory) -> Rulebook:
    directory = tmp_path_factory.mktemp("shipping")
    (directory / "actions.yaml").write_text(ACTIONS)
    (directory / "policy.cedar").write_text(POLICY)
    return Rulebook.load(directory)


def decided(rulebook: Rulebook, **args: object) -> tuple[str, str]:
    verdict = rulebook.decide(ActionRequest(action="ship_parcel", args={"price_cents": 500, **args}))
    return verdict.outcome, verdict.rule


def test_a_whole_number_written_with_a_decimal_point_is_a_whole_number_in_an_integer_field(shipping: Rulebook):
    assert decided(shipping, parcels=2.0, weight_kg=1) == ("allow", "ship")
    assert decided(shipping, parcels=11.0, weight_kg=1) == ("deny", "too_many_parcels")


def test_any_number_is_a_decimal_in_a_number_field_so_the_rules_read_one_type(shipping: Rulebook):
    assert decided(shipping, parcels=1, weight_kg=2.5) == ("allow", "ship")
    assert decided(shipping, parcels=1, weight_kg=30) == ("allow", "ship")
    assert decided(shipping, parcels=1, weight_kg=30.25) == ("deny", "too_heavy")


def test_numbers_inside_arrays_and_referenced_objects_follow_their_declared_types(shipping: Rulebook):
    assert decided(shipping, parcels=1, weight_kg=1, legs=[{"km": 600.5, "stops": 2.0}]) == ("deny", "long_leg")
    assert decided(shipping, parcels=1, weight_kg=1, legs=[{"km": 600, "stops": 2}]) == ("allow", "ship")


@pytest.mark.parametrize("price", [15.5, 1500.0])
def test_money_stays_integer_cents_and_a_decimal_is_refused_with_what_to_write(shipping: Rulebook, price: float):
    verdict = shipping.decide(
        ActionRequest(action="ship_parcel", args={"parcels": 1, "weight_kg": 1, "price_cents": price})
    )
    assert (verdict.outcome, verdict.rule) == ("deny", "invalid_arguments")
    assert verdict.reason.startswith("price_cents:") and "whole number of cents" in verdict.reason


def test_a_number_the_rules_cannot_hold_is_refused_not_rounded(shipping: Rulebook):
    assert decided(shipping, parcels=1, weight_kg=2.12345) == ("deny", "invalid_arguments")
    assert decided(shipping, parcels=1, weight_kg=1e300) == ("deny", "invalid_arguments")


def test_the_arguments_given_are_not_changed():
    spec = ActionSpec.model_validate(
        {"name": "a", "description": "a", "arguments": {"properties": {"n": {"type": "integer"}}}}
    )
    given = {"n": 2.0}
    assert for_rules(spec, given) == {"n": 2} and given == {"n": 2.0}


def test_a_whole_number_in_a_bundled_integer_field_is_decided_and_money_is_still_cents():
    airline = Rulebook.load(RULEBOOKS / "tau2-airline")
    bags = {"reservation_id": "YAX4DR", "total_baggages": 2.0, "nonfree_baggages": 0, "payment_id": "gift_card_1234567"}
    context = {"identity_verified": False}
    verdict = airline.decide(ActionRequest(action="update_reservation_baggages", args=bags, context=context))
    assert verdict.rule == "identity_not_verified"  # decided on its facts, not refused as a decimal
    with pytest.raises(InvalidArguments, match="whole number of cents"):
        airline.catalog.check("send_certificate", {"user_id": "a_b_1234", "amount_cents": 100.0})
