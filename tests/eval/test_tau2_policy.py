"""eval/tau2_policy.py: τ²-bench's gold write actions pass their rulebook, and each one-rule variant is stopped by
the rule it breaks (on a slice of the train tasks, so the test stays quick)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eval import tau2_airline, tau2_policy, tau2_retail
from eval.tau2_data import PASS, RULEBOOKS, TAU2, load_db, load_tasks
from eval.tau2_policy import Report, decide
from vigil.actions.policy import Policy
from vigil.actions.rulebook import Rulebook

needs_data = pytest.mark.skipif(not (TAU2 / "retail").is_dir(), reason=f"no {TAU2} (set VIGIL_SHARED_DATA)")
SLICE = 25
"""Train tasks per domain: the first 25 hold five action kinds of each domain."""

DISAGREEMENTS = {"retail": {"105"}, "airline": {"39"}}
"""Tasks whose gold breaks policy.md (see the last data test): the rulebook follows the policy there."""


def _report(domain: str, rulebook: Rulebook, count: int = SLICE, split: str | None = "train") -> Report:
    db = load_db(domain)
    tasks = load_tasks(domain, split)[:count]
    cases = [case for task in tasks for case in tau2_policy.BUILDERS[domain](task, db)]
    return Report(domain, split or "all", len(tasks), list(decide(rulebook, cases)))


def _rulebook(domain: str) -> Rulebook:
    return Rulebook.load(RULEBOOKS / f"tau2-{domain}")


@needs_data
@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_every_gold_action_passes_and_every_variant_is_stopped_by_its_rule(domain):
    report = _report(domain, _rulebook(domain))
    assert len(report.gold) >= 10
    assert {o.case.task for o in report.gold if o.said != PASS} <= DISAGREEMENTS[domain]
    wrong = [
        (o.case.task, o.case.variant, o.case.expected, o.said) for o in report.variants if o.said != o.case.expected
    ]
    assert wrong == []
    kinds = Counter(o.case.request.action for o in report.gold)
    assert len(kinds) >= 5, kinds


@needs_data
def test_the_variants_cover_the_rules_the_issue_names():
    named = {o.case.expected for d in ("retail", "airline") for o in _report(d, _rulebook(d), count=30).variants}
    assert {
        "order_of_another_user",
        "reservation_of_another_user",
        "return_only_delivered",
        "cancel_only_pending",
        "refund_not_original_or_gift_card",
        "payment_method_not_users",
        "not_confirmed",
        "identity_not_verified",
        "gift_card_balance_short",
        "free_bags_over_allowance",
        "cancel_not_eligible",
        "basic_economy_flights_fixed",
    } <= named


@needs_data
def test_a_rulebook_missing_a_rule_loses_its_variants():
    full = _rulebook("retail")
    text = (full.directory / "policy.cedar").read_text("utf-8")
    start = text.index('@id("refund_not_original_or_gift_card")')
    weakened = text[:start] + text[text.index('@id("payment_same_as_original")') :]
    rulebook = Rulebook("weakened", full.catalog, Policy(weakened))
    rows = _report("retail", rulebook, count=40).per_rule()
    assert rows["refund_not_original_or_gift_card"]["variants"] > 0
    assert rows["refund_not_original_or_gift_card"]["recall"] == 0.0


def _outcomes(domain: str, task_ids: set[str]) -> list[tau2_policy.Outcome]:
    db = load_db(domain)
    tasks = [task for task in load_tasks(domain, None) if task.id in task_ids]
    return list(decide(_rulebook(domain), [c for task in tasks for c in tau2_policy.BUILDERS[domain](task, db)]))


@needs_data
def test_where_tau2s_gold_and_its_policy_disagree_the_rulebook_follows_the_policy():
    retail = [o for o in _outcomes("retail", {"105", "64"}) if o.case.variant in ("gold", tau2_retail.REJECTED)]
    said = [(o.case.task, o.case.request.action, o.case.expected, o.said) for o in retail]
    assert said == [
        # Task 64: the gold tries an exchange on a pending order; tau2's own tool rejects it, and so does the gate.
        ("64", "exchange_delivered_order_items", "exchange_only_delivered", "exchange_only_delivered"),
        ("64", "modify_pending_order_items", PASS, PASS),
        # Task 105: the gift card pays a $21.10 difference holding $17 ("it must have enough balance").
        ("105", "exchange_delivered_order_items", PASS, "gift_card_balance_short"),
    ]
    airline = [o for o in _outcomes("airline", {"39"}) if o.case.variant == "gold"]
    said = [(o.case.request.args["reservation_id"], o.said) for o in airline]
    # Task 39: an insured economy reservation cancelled to "give up your seat", not a reason insurance covers.
    assert said == [("8C8K4E", PASS), ("LU15PA", PASS), ("MSJ4OA", "cancel_not_eligible")]


def test_the_cancellation_reason_is_read_from_the_users_instructions():
    assert tau2_airline.cancellation_reason("You are sick. You want to cancel.") == "health"
    assert tau2_airline.cancellation_reason("you feel unwell") == "health"
    assert tau2_airline.cancellation_reason("The storm grounded everything") == "weather"
    assert tau2_airline.cancellation_reason("You want to give up your seat for someone else.") == "change_of_plan"


def test_money_arguments_become_integer_cents():
    args = tau2_airline.vigil_args(
        "book_reservation", {"payment_methods": [{"payment_id": "gift_card_1234567", "amount": 348.5}]}
    )
    assert args["payment_methods"] == [{"payment_id": "gift_card_1234567", "amount_cents": 34850}]
    assert tau2_airline.vigil_args("send_certificate", {"user_id": "a_b_1234", "amount": 150}) == {
        "user_id": "a_b_1234",
        "amount_cents": 15000,
    }


def test_the_data_root_follows_vigil_shared_data():
    assert isinstance(TAU2, Path) and TAU2.name == "tau2"
