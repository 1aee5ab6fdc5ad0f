"""A rulebook's files are checked against each other when it loads: a mistake stops it, naming the file and the
line, instead of loading silently."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vigil.actions.policy import RulebookMistake
from vigil.actions.rulebook import Rulebook, Rulebooks
from vigil.actions.settings import ActionsSettings

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of the demo rulebook to make mistakes in."""
    return Path(shutil.copytree(RULEBOOKS / "demo", tmp_path / "demo"))


def edit(path: Path, old: str, new: str) -> int:
    """Replace ``old`` (once) in ``path``; the line it was on."""
    text = path.read_text("utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), "utf-8")
    return text[: text.index(old)].count("\n") + 1


def line_of(path: Path, text: str) -> int:
    return path.read_text("utf-8").splitlines().index(text) + 1


@pytest.mark.parametrize("name", ["demo", "tau2-retail", "tau2-airline"])
def test_each_bundled_rulebook_loads_checked_against_its_schema(name: str):
    assert (RULEBOOKS / name / "policy.cedarschema").is_file()
    assert Rulebook.load(RULEBOOKS / name, tenants=set()).policy.rules


def test_a_misspelled_precondition_stops_the_load_at_its_line_in_actions_yaml(demo: Path):
    actions = demo / "actions.yaml"
    line = edit(actions, "preconditions: [identity_not_verified,", "preconditions:\n  - identity_not_verifed\n  -")
    with pytest.raises(RulebookMistake) as stopped:
        Rulebook.load(demo)
    assert (stopped.value.path, stopped.value.line) == (str(actions), line + 1)
    assert "'identity_not_verifed' is the @id of no rule of policy.cedar" in str(stopped.value)


def test_a_precondition_must_be_a_forbid(demo: Path):
    edit(
        demo / "actions.yaml", "[identity_not_verified, not_confirmed]", "[identity_not_verified, cancel_pending_order]"
    )
    with pytest.raises(RulebookMistake, match="'cancel_pending_order' is a permit"):
        Rulebook.load(demo)


def test_a_rule_reading_an_argument_its_actions_do_not_declare_stops_the_load_at_the_rule(demo: Path):
    (demo / "policy.cedarschema").unlink()  # without a schema, the arguments are still checked
    policy = demo / "policy.cedar"
    edit(policy, "when { context.args.amount_cents > 10000 };", "when { context.args.amount > 10000 };")
    with pytest.raises(RulebookMistake) as stopped:
        Rulebook.load(demo)
    assert stopped.value.line == line_of(policy, '@id("goodwill_over_limit")')
    assert "reads context.args.amount, an argument issue_credit does not declare" in str(stopped.value)


def test_a_fact_the_schema_does_not_declare_stops_the_load_at_the_rule_that_reads_it(demo: Path):
    edit(demo / "policy.cedarschema", "  refundable_cents: Long,\n", "")
    policy = demo / "policy.cedar"
    with pytest.raises(RulebookMistake) as stopped:
        Rulebook.load(demo)
    assert stopped.value.line == line_of(policy, '@id("refund_over_remaining")')
    assert "policy.cedarschema" in str(stopped.value) and "refundable_cents" in str(stopped.value)


TENANT_RULE = """
@id("acme_no_email_changes")
@reason("Acme changes e-mails in its own portal.")
forbid(principal, action == Action::"change_email", resource == Tenant::"acme");
"""


def test_a_rule_for_a_tenant_the_settings_do_not_name_stops_the_load(demo: Path):
    policy = demo / "policy.cedar"
    policy.write_text(policy.read_text("utf-8") + TENANT_RULE, "utf-8")
    assert Rulebook.load(demo, tenants={"acme"}).policy.rules[-1].id == "acme_no_email_changes"
    rulebooks = Rulebooks(ActionsSettings(rulebooks={"acmee": str(demo)}).rulebook, RULEBOOKS, tenants={"acmee"})
    with pytest.raises(RulebookMistake) as stopped:
        rulebooks.of("acmee")
    assert stopped.value.line == line_of(policy, '@id("acme_no_email_changes")')
    assert "Tenant::'acme', a tenant VIGIL_ACTIONS__RULEBOOKS does not name" in str(stopped.value)


def test_the_tenants_that_exist_are_those_the_settings_name():
    assert ActionsSettings(rulebooks={"acme": "demo", "*": "tau2-retail"}).tenants == {"acme"}
