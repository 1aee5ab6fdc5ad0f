"""`vigil policy check`: a verdict a line, line for line, and a request that is not one denied as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vigil.actions.check import INVALID_REQUEST, check, render
from vigil.actions.rulebook import Rulebook, bundled, locate
from vigil.core.errors import RulebookError

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"
VERIFIED = {"identity_verified": True, "confirmed": True, "customer": {"id": "CUS-1001"}}
ORDER = {
    "customer_id": "CUS-1001",
    "status": "delivered",
    "total_cents": 8999,
    "refundable_cents": 8999,
    "payment_method_id": "PM-5001",
}
REFUND = {"order_id": "ORD-10001", "amount_cents": 1500, "payment_method_id": "PM-5001", "reason": "damaged"}


@pytest.fixture(scope="module")
def demo() -> Rulebook:
    return Rulebook.load(RULEBOOKS / "demo")


def line(action: str, args: dict[str, object], **context: object) -> str:
    return json.dumps({"action": action, "args": args, "context": {**VERIFIED, **context}, "tenant": "brightwave"})


def test_each_line_gets_its_verdict_in_order(demo: Rulebook):
    lines = [
        line("refund_order", REFUND, order=ORDER),
        line("refund_order", REFUND | {"payment_method_id": "PM-5002"}, order=ORDER),
        line("refund_order", REFUND, order=ORDER | {"customer_id": "CUS-1002"}),
        line("change_email", {"customer_id": "CUS-1001", "email": "new@example.com"}),
    ]
    verdicts = [json.loads(render(v)) for v in check(demo, lines)]
    assert [v["verdict"] for v in verdicts] == ["needs_approval", "deny", "deny", "allow"]
    assert [v["rule"] for v in verdicts] == [
        "refund_needs_approval",
        "refund_to_original_payment",
        "order_of_another_customer",
        "change_account_details",
    ]
    assert [v["approver"] for v in verdicts] == ["analyst", None, None, None]
    assert [v["separate_from"] for v in verdicts] == [["proposer", "reader"], [], [], []]
    assert all(set(v) == {"verdict", "rule", "reason", "approver", "separate_from"} and v["reason"] for v in verdicts)


def test_a_large_refund_shows_that_a_lead_must_approve_it(demo: Rulebook):
    [checked] = check(demo, [line("refund_order", REFUND | {"amount_cents": 8000}, order=ORDER)])
    assert json.loads(render(checked)) == {
        "verdict": "needs_approval",
        "rule": "large_refund_needs_lead",
        "reason": "A refund over £50 moves a lot of money: a lead approves it.",
        "approver": "lead",
        "separate_from": [],
    }


def on(day: int, text: str, **fields: object) -> str:
    """The request ``text`` made on October ``day`` (and with ``fields``)."""
    return json.dumps(json.loads(text) | {"at": f"2026-10-{day:02d}T09:00:00Z", **fields})


def test_a_line_that_completes_a_risk_pattern_with_the_lines_before_it_is_blocked(demo: Rulebook):
    small = REFUND | {"amount_cents": 3000}
    lines = [
        on(1, line("refund_order", small, order=ORDER), conversation_id="c-1"),
        on(2, line("refund_order", small, order=ORDER), conversation_id="c-2"),
    ]
    first, second = check(demo, lines)
    assert (first.verdict, first.rule, first.approver) == ("needs_approval", "refund_needs_approval", "analyst")
    assert (second.verdict, second.rule, second.approver) == ("blocked", "refund_splitting_order", None)
    assert "conversation c-1" in second.reason and "proposed now" in second.reason


def test_the_risk_patterns_count_only_what_was_allowed_or_held_within_their_window(demo: Rulebook):
    small = REFUND | {"amount_cents": 3000}
    refused = on(1, line("refund_order", small | {"payment_method_id": "PM-5002"}, order=ORDER))
    later = on(2, line("refund_order", small, order=ORDER))
    assert [c.verdict for c in check(demo, [refused, later])] == ["deny", "needs_approval"]
    long_after = on(31, line("refund_order", small, order=ORDER))  # past the pattern's 14 days
    assert [c.verdict for c in check(demo, [later, long_after])] == ["needs_approval", "needs_approval"]


def test_lines_without_times_happen_together_and_the_customer_comes_from_the_context(demo: Rulebook):
    small = line("refund_order", REFUND | {"amount_cents": 3000}, order=ORDER)
    assert [c.verdict for c in check(demo, [small, small])] == ["needs_approval", "blocked"]
    anonymous = json.loads(small)
    del anonymous["context"]["customer"]  # no customer: no history to check against (the policy denies anyway)
    assert [c.verdict for c in check(demo, [json.dumps(anonymous)] * 2)] == ["deny", "deny"]


def test_a_line_that_is_not_a_request_is_denied_and_keeps_its_place(demo: Rulebook):
    lines = [
        "not json",
        "",
        json.dumps({"args": {}}),
        json.dumps({"action": "x", "approve": True}),
        line("change_email", {"customer_id": "CUS-1001", "email": "a@example.com"}),
    ]
    verdicts = list(check(demo, lines))
    assert [v.rule for v in verdicts[:4]] == [INVALID_REQUEST] * 4
    assert verdicts[0].reason.startswith("line 1:") and "action" in verdicts[2].reason
    assert verdicts[4].verdict == "allow"


def test_a_role_that_exists_nowhere_is_not_a_request(demo: Rulebook):
    request = json.loads(line("change_email", {"customer_id": "CUS-1001", "email": "a@example.com"}))
    [verdict] = check(demo, [json.dumps(request | {"role": "manager"})])
    assert verdict.rule == INVALID_REQUEST and "role" in verdict.reason and "'lead'" in verdict.reason


def test_a_decimal_in_the_context_is_denied_not_rounded(demo: Rulebook):
    [verdict] = check(demo, [line("refund_order", REFUND, order=ORDER | {"refundable_cents": 89.99})])
    assert (verdict.verdict, verdict.rule) == ("deny", "invalid_context")


def test_rulebooks_are_found_by_name_or_path(tmp_path: Path):
    assert "demo" in bundled(RULEBOOKS)
    assert locate("demo", RULEBOOKS) == RULEBOOKS / "demo"
    assert locate(str(tmp_path), RULEBOOKS) == tmp_path


def test_a_rule_on_an_action_the_catalog_lacks_is_refused(tmp_path: Path):
    (tmp_path / "actions.yaml").write_text("actions:\n  cancel_order: {description: Cancel.}\n")
    (tmp_path / "policy.cedar").write_text(
        '@id("r") @reason("r") permit(principal, action == Action::"cancel_ordr", resource);'
    )
    with pytest.raises(RulebookError, match="cancel_ordr"):
        Rulebook.load(tmp_path)
