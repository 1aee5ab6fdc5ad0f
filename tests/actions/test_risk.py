"""The conjunctive-risk guard: each Brightwave pattern is caught, its harmless look-alikes are not; windows, statuses,
variable binding, scope and the load errors a pattern author sees."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from vigil.actions.patterns import RiskPatternError
from vigil.actions.risk import ActionRecord, Guard

RULES = Path(__file__).resolve().parents[2] / "knowledge" / "rulebooks" / "demo" / "risk.yaml"
ACTIONS = [
    "refund_order", "cancel_order", "issue_credit", "change_order_address", "change_customer_address",
    "change_email", "reset_two_factor", "add_payment_method",
]  # fmt: skip
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
_ids = itertools.count()


def act(
    name: str, hours: float = 0, conversation: str = "c1", status: str = "executed", **arguments: Any
) -> ActionRecord:
    facts = arguments.pop("facts", {})
    return ActionRecord(
        f"a{next(_ids)}", conversation, arguments.pop("customer", "BW-100001"), "brightwave", name, arguments,
        status, T0 + timedelta(hours=hours), facts,  # type: ignore[arg-type]
    )  # fmt: skip


def refund(hours: float, order: str = "ORD-1001", cents: int = 3000, original: bool = True, **kw: Any) -> ActionRecord:
    facts = {"payment_method_original": original, **kw.pop("facts", {})}
    method = kw.pop("payment_method_id", "PM-1" if original else "PM-9")
    return act("refund_order", hours, order_id=order, amount_cents=cents, payment_method_id=method, facts=facts, **kw)


@pytest.fixture(scope="module")
def guard() -> Guard:
    return Guard.from_file(RULES, ACTIONS)


def blocked_by(guard: Guard, *steps: ActionRecord) -> str | None:
    """The pattern that blocks the last step given the others as history."""
    *history, proposed = steps
    match = guard.check(proposed, history)
    return match.pattern.name if match else None


# ---- Each pattern caught, its look-alike let through -------------------------------------------------------------


def test_email_change_then_2fa_reset_then_refund_to_another_method_is_an_account_takeover(guard: Guard) -> None:
    chain = [act("change_email", 0, email="x@example.com"), act("reset_two_factor", 1), refund(2, original=False)]
    assert blocked_by(guard, *chain) == "account_takeover"
    assert blocked_by(guard, chain[1], chain[2], chain[0]) == "account_takeover", (
        "the order of the steps does not matter"
    )
    assert blocked_by(guard, chain[0], chain[1], refund(2, original=True)) is None, "a refund to the original card"


def test_a_refund_to_the_payment_method_added_after_the_takeover_steps_is_bound_by_its_id(guard: Guard) -> None:
    added = act("add_payment_method", 1.5, kind="card", label="Visa 1", facts={"payment_method_id": "PM-77"})
    steps = [act("change_email", 0, email="x@example.com"), act("reset_two_factor", 1), added]
    to_new = act("refund_order", 2, order_id="ORD-1", amount_cents=100, payment_method_id="PM-77")
    to_other = act("refund_order", 2, order_id="ORD-1", amount_cents=100, payment_method_id="PM-78")
    assert blocked_by(guard, *steps, to_new) == "account_takeover_new_method"
    assert blocked_by(guard, *steps, to_other) is None


def test_a_credit_after_email_2fa_and_a_new_method_is_blocked_but_not_without_the_new_method(guard: Guard) -> None:
    steps = [act("change_email", 0, email="x@example.com"), act("reset_two_factor", 1)]
    added = act("add_payment_method", 2, kind="card", label="Visa")
    credit = act("issue_credit", 3, amount_cents=1000)
    assert blocked_by(guard, *steps, added, credit) == "account_takeover_credit"
    assert blocked_by(guard, *steps, credit) is None


def test_redirecting_a_delivery_after_email_and_2fa_is_blocked(guard: Guard) -> None:
    address = {"line1": "1 A St", "city": "Leeds", "postcode": "LS1 1AA"}
    steps = [act("change_email", 0, email="x@example.com"), act("reset_two_factor", 1)]
    assert blocked_by(guard, *steps, act("change_order_address", 2, order_id="ORD-1", address=address)) == (
        "account_takeover_redirect"
    )
    assert blocked_by(guard, steps[0], act("change_order_address", 2, order_id="ORD-1", address=address)) is None


def test_a_refund_to_a_recently_added_method_after_a_2fa_reset_is_blocked(guard: Guard) -> None:
    recent = {"payment_method_added_at": (T0 - timedelta(days=2)).isoformat()}
    old = {"payment_method_added_at": (T0 - timedelta(days=200)).isoformat()}
    reset = act("reset_two_factor", 0)
    assert blocked_by(guard, reset, refund(5, original=False, facts=recent)) == "new_method_refund_after_2fa_reset"
    assert blocked_by(guard, reset, refund(5, original=False, facts=old)) is None
    assert blocked_by(guard, refund(5, original=False, facts=recent), reset) is None, "a sequence: reset comes first"


def test_email_and_address_change_then_a_refund_elsewhere_is_a_contact_hijack(guard: Guard) -> None:
    moved = act("change_customer_address", 0, address={"line1": "1 B St", "city": "York", "postcode": "YO1 1AA"})
    email = act("change_email", 1, email="y@example.com")
    assert blocked_by(guard, moved, email, refund(3, original=False)) == "contact_hijack_refund"
    assert blocked_by(guard, moved, email, refund(3, original=True)) is None, "moving home with a new e-mail"


def test_email_change_redirect_and_refund_of_the_same_order_is_blocked_but_not_of_another(guard: Guard) -> None:
    address = {"line1": "1 A St", "city": "Leeds", "postcode": "LS1 1AA"}
    steps = [
        act("change_email", 0, email="x@example.com"),
        act("change_order_address", 1, order_id="ORD-5", address=address),
    ]
    assert blocked_by(guard, *steps, refund(30, order="ORD-5")) == "contact_hijack_redirect"
    assert blocked_by(guard, *steps, refund(30, order="ORD-6")) is None


def test_one_refund_split_into_small_ones_on_an_order_is_blocked(guard: Guard) -> None:
    assert blocked_by(guard, refund(0, cents=3000), refund(1, cents=3000)) == "refund_splitting_order"
    assert blocked_by(guard, refund(0, cents=2000), refund(1, cents=2500)) is None, "45.00 in all"
    assert blocked_by(guard, refund(0, cents=3000), refund(1, order="ORD-2", cents=3000)) is None, "two orders"
    assert blocked_by(guard, refund(0, cents=6000), refund(1, cents=1000)) is None, "the large one needed a lead anyway"


def test_a_third_refund_on_one_order_within_a_month_is_blocked(guard: Guard) -> None:
    assert blocked_by(guard, refund(0, cents=100), refund(240, cents=100), refund(480, cents=100)) == (
        "refund_repeated_order"
    )
    assert blocked_by(guard, refund(0, cents=100), refund(24 * 25, cents=100), refund(24 * 55, cents=100)) is None


def test_small_refunds_across_orders_above_100_in_a_week_are_blocked(guard: Guard) -> None:
    three = [refund(0, "ORD-1", 4000), refund(48, "ORD-2", 4000), refund(120, "ORD-3", 4000)]
    assert blocked_by(guard, *three) == "refund_splitting_customer"
    assert blocked_by(guard, refund(0, "ORD-1", 4000), refund(48, "ORD-2", 3000), refund(120, "ORD-3", 3000)) is None


def test_goodwill_in_a_third_conversation_within_a_month_is_blocked(guard: Guard) -> None:
    credits = [act("issue_credit", 24 * d, f"c{d}", amount_cents=500) for d in (0, 10, 20)]
    assert blocked_by(guard, *credits) == "repeated_goodwill"
    same_chat = [act("issue_credit", h, "c1", amount_cents=500) for h in (0, 1, 2)]
    assert blocked_by(guard, *same_chat) is None, "three credits in one conversation are not 'again'"
    spread = [act("issue_credit", 24 * d, f"c{d}", amount_cents=500) for d in (0, 40, 80)]
    assert blocked_by(guard, *spread) is None


def test_refunding_a_cancelled_paid_order_is_a_double_dip_in_either_order(guard: Guard) -> None:
    cancel = act("cancel_order", 0, order_id="ORD-1001", facts={"refunds_payment": True})
    assert blocked_by(guard, cancel, refund(1)) == "cancel_then_refund"
    assert blocked_by(
        guard, refund(0), act("cancel_order", 1, order_id="ORD-1001", facts={"refunds_payment": True})
    ) == ("cancel_then_refund")
    assert blocked_by(guard, cancel, refund(1, order="ORD-2")) is None
    unpaid = act("cancel_order", 0, order_id="ORD-1001", facts={"refunds_payment": False})
    assert blocked_by(guard, unpaid, refund(1)) is None


# ---- Windows, statuses, scope ------------------------------------------------------------------------------------


def test_a_chain_counts_only_within_the_patterns_window(guard: Guard) -> None:
    email, reset = act("change_email", 0, email="x@example.com"), act("reset_two_factor", 1)
    assert blocked_by(guard, email, reset, refund(14 * 24 - 1, original=False)) == "account_takeover"
    assert blocked_by(guard, email, reset, refund(14 * 24 + 1, original=False)) is None


@pytest.mark.parametrize("status", ["suggested", "approved", "executing", "in_doubt", "executed"])
def test_actions_done_pending_or_maybe_done_count(guard: Guard, status: str) -> None:
    assert blocked_by(guard, refund(0, status=status), refund(1)) == "refund_splitting_order"


@pytest.mark.parametrize("status", ["rejected", "failed", "expired", "blocked", "declined"])
def test_actions_refused_or_undone_never_count(guard: Guard, status: str) -> None:
    assert blocked_by(guard, refund(0, status=status), refund(1)) is None


def test_other_customers_and_tenants_and_the_proposed_action_itself_are_ignored(guard: Guard) -> None:
    proposed = refund(1)
    other = refund(0, customer="BW-100002")
    elsewhere = ActionRecord(**{**_fields(refund(0)), "tenant": "copperleaf"})
    itself = ActionRecord(**{**_fields(proposed), "status": "approved"})
    assert guard.check(proposed, [other, elsewhere, itself]) is None


def _fields(record: ActionRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in ActionRecord.__slots__}


def test_a_case_scoped_pattern_only_looks_at_the_same_conversation(tmp_path: Path) -> None:
    rules = tmp_path / "risk.yaml"
    rules.write_text(
        "patterns:\n- name: twice_in_case\n  description: Two credits in the same conversation.\n"
        "  window_s: 86400\n  scope: case\n  aggregate: {action: issue_credit, count: {gte: 2}}\n"
    )
    guard = Guard.from_file(rules)
    assert blocked_by(guard, act("issue_credit", 0, "c1"), act("issue_credit", 1, "c1")) == "twice_in_case"
    assert blocked_by(guard, act("issue_credit", 0, "c2"), act("issue_credit", 1, "c1")) is None


# ---- What the match says ----------------------------------------------------------------------------------------


def test_the_match_lists_the_chain_in_time_order_and_explains_each_step(guard: Guard) -> None:
    email = act("change_email", 0, "c-7", email="x@example.com")
    reset = act("reset_two_factor", 25, "c-8")
    noise = refund(26, order="ORD-3", cents=100)
    proposed = refund(30, original=False)
    match = guard.check(proposed, [reset, noise, email])
    assert match is not None and match.chain == (email, reset, proposed)
    text = match.explain()
    assert "account_takeover" in text and match.pattern.description in text
    assert "change_email(email=x@example.com) in conversation c-7 at 2026-03-02 10:00 UTC, executed" in text
    assert "reset_two_factor() in conversation c-8 at 2026-03-03 11:00 UTC" in text
    assert text.splitlines()[-1].endswith("proposed now")


def test_an_aggregate_match_says_what_was_passed(guard: Guard) -> None:
    match = guard.check(refund(1, cents=3000), [refund(0, cents=3000)])
    assert match is not None and len(match.chain) == 2
    assert "2 actions (at least 2)" in match.explain() and "totalling 6000 (above 5000)" in match.explain()


def test_ten_thousand_look_alikes_without_a_completing_step_cost_a_scan_not_a_product(guard: Guard) -> None:
    history = [act("change_email", -i / 10, email="x@example.com") for i in range(5000)]
    history += [act("reset_two_factor", -i / 10 - 0.05) for i in range(5000)]
    to_unknown = act("refund_order", 1, order_id="ORD-1", amount_cents=100, payment_method_id="PM-5")
    began = time.perf_counter()
    assert guard.check(to_unknown, history) is None
    assert time.perf_counter() - began < 5, "backtracking over every pair takes over a minute"


# ---- Loading -----------------------------------------------------------------------------------------------------

BASE = "patterns:\n- name: p\n  description: A pattern for a test.\n  window_s: 60\n  scope: customer\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  steps:\n  - action: refund_order\n", "pattern 'p': steps"),
        ("  steps:\n  - {action: a, where: {amount: 1}}\n  - {action: b}\n", "'amount': not a field"),
        ("  steps:\n  - {action: a, where: {facts.x: {greater: 1}}}\n  - {action: b}\n", "unknown operator 'greater'"),
        ("  steps:\n  - {action: a, where: {facts.x: {gt: $y}}}\n  - {action: b}\n", "$y is compared but never bound"),
        ("  aggregate: {action: a}\n", "needs count, sum or both"),
        ("  aggregate: {action: a, sum: {gt: 5}}\n", "sum needs 'of'"),
        ("  steps:\n  - {action: a}\n  - {action: b}\n  aggregate: {action: a, count: {gte: 2}}\n", "either steps"),
        ("  order: random\n  steps:\n  - {action: a}\n  - {action: b}\n", "pattern 'p': order"),
    ],
)
def test_a_bad_pattern_is_a_load_error_naming_the_pattern_and_the_field(
    tmp_path: Path, body: str, message: str
) -> None:
    rules = tmp_path / "risk.yaml"
    rules.write_text(BASE + body)
    with pytest.raises(RiskPatternError) as caught:
        Guard.from_file(rules)
    assert message in str(caught.value) and str(rules) in str(caught.value)


def test_an_action_the_catalog_lacks_or_a_repeated_name_is_a_load_error(tmp_path: Path) -> None:
    rules = tmp_path / "risk.yaml"
    rules.write_text(BASE + "  steps:\n  - {action: refund_order}\n  - {action: refnud_order}\n")
    with pytest.raises(RiskPatternError, match="pattern 'p': action: unknown action 'refnud_order'"):
        Guard.from_file(rules, ACTIONS)
    rules.write_text(
        BASE
        + "  aggregate: {action: a, count: {gte: 2}}\n"
        + BASE.removeprefix("patterns:\n")
        + "  aggregate: {action: a, count: {gte: 2}}\n"
    )
    with pytest.raises(RiskPatternError, match="a second pattern has this name"):
        Guard.from_file(rules)


def test_a_file_that_is_not_yaml_is_a_load_error(tmp_path: Path) -> None:
    rules = tmp_path / "risk.yaml"
    rules.write_text("patterns: [\n")
    with pytest.raises(RiskPatternError, match="cannot read"):
        Guard.from_file(rules)
