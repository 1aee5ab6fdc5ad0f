"""A rulebook's own cases (tests.yaml): read with the line of each case, decided, and reported PASS or FAIL with
what a failure expected and got; a case that is not one, or expects a rule that does not exist, is named at its
line."""

from __future__ import annotations

from pathlib import Path

import pytest

from vigil.actions import expectations
from vigil.actions.rulebook import Rulebook
from vigil.core.errors import RulebookError

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"

CASES = """\
given:
  ready: &ready {identity_verified: true, confirmed: true, customer: {id: CUS-1001}}
cases:
  - name: an e-mail change is allowed
    request: {action: change_email, args: {customer_id: CUS-1001, email: a@example.com}, context: *ready}
    expect: {verdict: allow, rule: change_account_details}

  - name: a credit expected to need a lead
    request:
      action: issue_credit
      args: {customer_id: CUS-1001, amount_cents: 2000, reason: outage}
      context: {<<: *ready, goodwill: {last_30_days_cents: 0}}
    expect: {verdict: needs_approval, rule: credit_needs_approval, approver: lead}
"""


@pytest.fixture(scope="module")
def demo() -> Rulebook:
    return Rulebook.load(RULEBOOKS / "demo")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tests.yaml"
    path.write_text(text, "utf-8")
    return path


def test_each_case_is_decided_and_a_wrong_approver_fails_it(demo: Rulebook, tmp_path: Path):
    path = write(tmp_path, CASES)
    outcomes = expectations.run(demo, expectations.load(path, demo))
    assert [(o.line, o.passed) for o in outcomes] == [(4, True), (8, False)]
    assert outcomes[1].verdict.approver == "analyst"
    lines = list(expectations.report(path, demo, outcomes))
    assert lines[:5] == [
        "PASS  an e-mail change is allowed",
        f"FAIL  a credit expected to need a lead  ({path}:8)",
        "        expected: needs_approval by credit_needs_approval, a lead approves",
        "        got:      needs_approval by credit_needs_approval, a analyst approves: A credit moves money: a second "
        "analyst approves it.",
        "1 passed, 1 failed (demo: 2 cases)",
    ]
    assert lines[5].startswith("rules no case names: identity_not_verified, not_confirmed, order_of_another_customer")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("rule: credit_needs_approval", "rule: credit_needs_aproval"), r":8: case .* expects 'credit_needs_aproval'"),
        (("verdict: allow", "verdict: yes"), r":4: expect\.verdict: Input should be 'allow'"),
        (("approver: lead", "approver: manager"), r":8: expect\.approver: Input should be 'analyst'"),
        (("action: issue_credit", "action: issue_credit\n      role: manager"), r":8: request\.role"),
        (("  - name: an e-mail", "  - nam: an e-mail"), r":4: name: Field required"),
        (("cases:", "case:"), r"tests\.yaml: cases: Field required"),
    ],
    ids=["unknown-rule", "unknown-verdict", "unknown-approver", "unknown-role", "no-name", "no-cases"],
)
def test_a_case_that_is_not_one_is_named_at_its_line(
    demo: Rulebook, tmp_path: Path, change: tuple[str, str], problem: str
):
    path = write(tmp_path, CASES.replace(*change))
    with pytest.raises(RulebookError, match=problem):
        expectations.load(path, demo)


@pytest.mark.parametrize("name", ["demo", "tau2-retail", "tau2-airline"])
def test_the_cases_each_bundled_rulebook_ships_pass_and_name_every_rule(name: str):
    rulebook = Rulebook.load(RULEBOOKS / name)
    path = RULEBOOKS / name / expectations.TESTS_FILE
    outcomes = expectations.run(rulebook, expectations.load(path, rulebook))
    assert [o.case.name for o in outcomes if not o.passed] == []
    assert expectations.unnamed(rulebook, outcomes) == []
    assert {"allow", "deny"} <= {o.verdict.outcome for o in outcomes}
    held = [rule.id for rule in rulebook.policy.rules if rule.outcome == "needs_approval"]
    approved = {o.case.expect.rule for o in outcomes if o.case.expect.approver}
    assert approved == set(held)  # each approval's case says who approves
