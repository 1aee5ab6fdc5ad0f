"""The policy: three verdicts from Cedar rules, each naming the rule that decided and why; fail closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil.actions.policy import NO_PERMIT, Policy, RulebookMistake
from vigil.core.errors import InvalidArguments, RulebookError

RULES = """
@id("identity_not_verified")
@reason("Verify the customer first.")
forbid(principal, action, resource) unless { context.identity_verified };

@id("refund_over_remaining")
@reason("No more than what is left to refund.")
forbid(principal, action == Action::"refund_order", resource)
when { context.args.amount_cents > context.order.refundable_cents };

@id("small_refund")
@outcome("needs_approval")
@approver("analyst")
@reason("Refunds move money.")
permit(principal, action == Action::"refund_order", resource) when { context.args.amount_cents <= 5000 };

@id("large_refund")
@outcome("needs_approval")
@reason("Large refunds need a lead.")
permit(principal, action == Action::"refund_order", resource) when { context.args.amount_cents > 5000 };

@id("change_email")
@reason("A verified customer may change their e-mail.")
permit(principal, action == Action::"change_email", resource);
"""


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy(RULES, source="test")


def refund(amount: int, refundable: int = 10_000, **facts: object) -> dict[str, object]:
    return {
        "identity_verified": True,
        "args": {"amount_cents": amount},
        "order": {"refundable_cents": refundable},
        **facts,
    }


def test_a_permit_without_an_outcome_allows(policy: Policy):
    verdict = policy.decide("change_email", {"identity_verified": True, "args": {}}, tenant="t")
    assert (verdict.outcome, verdict.rule, verdict.approver) == ("allow", "change_email", None)
    assert verdict.reason == "A verified customer may change their e-mail."


def test_money_waits_for_the_approver_the_rule_names(policy: Policy):
    small = policy.decide("refund_order", refund(1500), tenant="t")
    large = policy.decide("refund_order", refund(9000), tenant="t")
    assert (small.outcome, small.rule, small.approver) == ("needs_approval", "small_refund", "analyst")
    assert (large.outcome, large.rule, large.approver) == ("needs_approval", "large_refund", "lead")


def test_a_forbid_wins_and_names_itself(policy: Policy):
    verdict = policy.decide("refund_order", refund(9000, refundable=1000), tenant="t")
    assert (verdict.outcome, verdict.rule) == ("deny", "refund_over_remaining")
    assert verdict.reason == "No more than what is left to refund."


def test_the_first_forbid_in_file_order_is_named(policy: Policy):
    verdict = policy.decide("refund_order", refund(9000, refundable=1000, identity_verified=False), tenant="t")
    assert verdict.rule == "identity_not_verified"


def test_a_hard_rule_that_matched_is_named_before_a_precondition_earlier_in_the_file(policy: Policy):
    # Waiting for the identity check would only delay a refund no conversation can make right.
    context = refund(9000, refundable=1000, identity_verified=False)
    verdict = policy.decide("refund_order", context, tenant="t", preconditions={"identity_not_verified"})
    assert (verdict.outcome, verdict.rule) == ("deny", "refund_over_remaining")


def test_a_precondition_that_matched_is_named_before_a_rule_that_could_not_be_evaluated(policy: Policy):
    context = {"identity_verified": False, "args": {"amount_cents": 100}}  # no order: refund_over_remaining fails
    verdict = policy.decide("refund_order", context, tenant="t", preconditions={"identity_not_verified"})
    assert (verdict.outcome, verdict.rule) == ("deny", "identity_not_verified")
    assert verdict.reason == "Verify the customer first."


def test_a_hard_rule_that_could_not_be_evaluated_is_named_before_a_precondition_that_could_not(policy: Policy):
    verdict = policy.decide(
        "refund_order", {"args": {"amount_cents": 100}}, tenant="t", preconditions={"identity_not_verified"}
    )
    assert (verdict.outcome, verdict.rule) == ("deny", "refund_over_remaining")
    assert "could not be checked" in verdict.reason


def test_no_permit_denies(policy: Policy):
    verdict = policy.decide("reset_two_factor", {"identity_verified": True, "args": {}}, tenant="t")
    assert (verdict.outcome, verdict.rule) == ("deny", NO_PERMIT)


def test_a_missing_fact_denies_naming_the_rule_that_needed_it(policy: Policy):
    # Cedar skips a rule it cannot evaluate: a skipped forbid would let the refund through.
    verdict = policy.decide("refund_order", {"identity_verified": True, "args": {"amount_cents": 100}}, tenant="t")
    assert (verdict.outcome, verdict.rule) == ("deny", "refund_over_remaining")
    assert "could not be checked" in verdict.reason and "order" in verdict.reason


def test_a_decimal_amount_is_refused_rather_than_guessed(policy: Policy):
    with pytest.raises(InvalidArguments) as refused:
        policy.decide("refund_order", refund(100) | {"args": {"amount_cents": 15.5}}, tenant="t")
    assert refused.value.reason == "invalid_context" and "cents" in refused.value.detail


def test_a_null_fact_counts_as_missing(policy: Policy):
    verdict = policy.decide("refund_order", refund(100) | {"order": None}, tenant="t")
    assert verdict.outcome == "deny"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("permit(principal, action, resource);", "needs @id and @reason"),
        ('@id("a") permit(principal, action, resource);', "needs @id and @reason"),
        (
            '@id("a") @reason("r") permit(principal, action, resource);\n'
            '@id("a") @reason("r") forbid(principal, action, resource);',
            "used twice",
        ),
        ('@id("a") @reason("r") @outcome("needs_approval") forbid(principal, action, resource);', "takes no @outcome"),
        ('@id("a") @reason("r") @outcome("maybe") permit(principal, action, resource);', "allow or needs_approval"),
        ("permit(principal, action resource);", "not a valid Cedar policy"),
    ],
)
def test_a_rule_that_cannot_name_itself_or_is_not_cedar_is_refused_at_load(text: str, problem: str):
    with pytest.raises(RulebookError, match=problem):
        Policy(text, source="rules.cedar")


def test_load_reads_a_file_and_names_it_in_errors(tmp_path: Path):
    path = tmp_path / "policy.cedar"
    path.write_text("permit(principal, action, resource);")
    with pytest.raises(RulebookError, match=r"policy\.cedar"):
        Policy.load(path)
    with pytest.raises(RulebookError, match=r"missing\.cedar"):
        Policy.load(tmp_path / "missing.cedar")


def test_the_actions_the_rules_name_are_known(policy: Policy):
    assert policy.actions == {"refund_order", "change_email"}


LOOKS_RIGHT = """// a rule with a mistake at its third line
@id("refund")
@reason("Refunds move money.")
"""


@pytest.mark.parametrize(
    ("rule", "line", "problem"),
    [
        (
            '@outcome("needs_approval")\n@approver("manager")\npermit(principal, action, resource);',
            5,
            "@approver 'manager' is not a role (analyst, lead, admin)",
        ),
        ('@approver("lead")\npermit(principal, action, resource);', 4, "@approver is for a permit with @outcome"),
        (
            'permit(\n  principal == Role::"manager",\n  action,\n  resource\n);',
            5,
            "Role::'manager' is not a role",
        ),
        ("permit(principal, action, resource)\nwhen { principal is Roel };", 2, "Roel is not an entity type"),
        ('forbid(principal, action, resource)\nwhen { resource == Tennant::"acme" };', 5, "Tennant is not an entity"),
    ],
    ids=["unknown-approver", "approver-without-approval", "unknown-role", "unknown-type-in-is", "unknown-type"],
)
def test_a_role_approver_or_entity_type_that_exists_nowhere_stops_the_load_at_its_line(
    rule: str, line: int, problem: str
):
    with pytest.raises(RulebookMistake) as stopped:
        Policy(LOOKS_RIGHT + rule, source="rules.cedar")
    assert (stopped.value.path, stopped.value.line) == ("rules.cedar", line)
    assert problem in stopped.value.problem and str(stopped.value).startswith(f"rules.cedar:{line}: rule 'refund'")


SCHEMA = """
entity Role enum ["analyst", "lead", "admin"];
entity Tenant;
action refund_order appliesTo {
  principal: Role, resource: Tenant,
  context: {args: {amount_cents: Long}, identity_verified: Bool, order: {refundable_cents: Long}},
};
action change_email appliesTo {principal: Role, resource: Tenant, context: {args: {}, identity_verified: Bool}};
"""


def test_rules_that_fit_the_schema_load():
    assert Policy(RULES, source="rules.cedar", schema=SCHEMA, schema_source="rules.cedarschema").rules


@pytest.mark.parametrize(
    ("mistake", "problem"),
    [
        (("context.order.refundable_cents", "context.order.refundabel_cents"), "order.refundabel_cents"),
        (("context.args.amount_cents > context.order", 'context.args.amount_cents like "1*" && context.order'), "Long"),
    ],
    ids=["a-misspelled-fact", "a-fact-used-as-another-type"],
)
def test_a_rule_that_does_not_fit_the_schema_stops_the_load_at_its_line(mistake: tuple[str, str], problem: str):
    wrong = RULES.replace(*mistake)
    with pytest.raises(RulebookMistake) as stopped:
        Policy(wrong, source="rules.cedar", schema=SCHEMA, schema_source="rules.cedarschema")
    assert stopped.value.line == wrong.splitlines().index('@id("refund_over_remaining")') + 1
    assert "does not fit rules.cedarschema" in str(stopped.value) and problem in str(stopped.value)


def test_a_schema_that_is_not_cedar_stops_the_load_naming_it():
    with pytest.raises(RulebookError, match=r"rules\.cedarschema: not a Cedar schema"):
        Policy(RULES, source="rules.cedar", schema="entity Role", schema_source="rules.cedarschema")


def test_when_several_holds_match_the_highest_approver_and_everyone_they_keep_out_apply():
    """A second-analyst rule and a lead rule both match a refund: a lead approves it, and the analyst who proposed
    it is still kept out (the first hold in file order alone had decided both)."""
    text = """
@id("needs_second_analyst")
@outcome("needs_approval")
@approver("analyst")
@separate_from("proposer")
@reason("A second analyst approves refunds.")
permit(principal, action == Action::"refund_order", resource);

@id("needs_lead_over_50")
@outcome("needs_approval")
@approver("lead")
@reason("A lead approves refunds over £50.")
permit(principal, action == Action::"refund_order", resource)
when { context.args.amount_cents > 5000 };
"""
    policy = Policy(text, source="rules.cedar")
    large = policy.decide("refund_order", {"args": {"amount_cents": 8999}}, tenant="acme")
    assert (large.rule, large.approver, large.separate_from) == ("needs_lead_over_50", "lead", ("proposer",))
    small = policy.decide("refund_order", {"args": {"amount_cents": 3000}}, tenant="acme")
    assert (small.rule, small.approver, small.separate_from) == ("needs_second_analyst", "analyst", ("proposer",))
