"""The checks across a rulebook's files when it loads, so that a mistake stops it instead of loading silently: a
rule on an action ``actions.yaml`` lacks, a precondition that names no forbid, a rule that reads an argument no
action of its scope has, a rule for a tenant that is configured nowhere. Each is a ``RulebookMistake`` naming the
file and the line.

What one file can check alone is checked as it loads: the actions' schemas (``Catalog``), each rule's annotations,
roles, approvers and entity types, and the facts and arguments against ``policy.cedarschema`` when there is one
(``Policy``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import yaml

from vigil.actions.catalog import Catalog
from vigil.actions.policy import Policy, Rule, RulebookMistake
from vigil.core.errors import RulebookError


def validate(
    catalog: Catalog,
    policy: Policy,
    *,
    actions_file: Path,
    policy_file: Path,
    tenants: Collection[str] | None = None,
) -> None:
    """Check that ``catalog`` (read from ``actions_file``) and ``policy`` (from ``policy_file``) agree.

    Args:
        tenants: the tenants that exist (those the settings name); a rule naming another is a mistake. None: any.

    Raises:
        RulebookError: the first disagreement (a ``RulebookMistake`` where it has a line).
    """
    unknown = sorted(policy.actions - set(catalog))
    if unknown:
        raise RulebookError(f"{policy_file}: rules name actions {actions_file.name} lacks: {', '.join(unknown)}")
    forbids = {rule.id for rule in policy.rules if rule.effect == "forbid"}
    for name in sorted(catalog.preconditions - forbids):
        what = "a permit" if name in {rule.id for rule in policy.rules} else f"the @id of no rule of {policy_file.name}"
        raise RulebookMistake(
            str(actions_file),
            _line(actions_file, "preconditions", name),
            f"preconditions: {name!r} is {what}; a precondition is the @id of a forbid",
        )
    for rule in policy.rules:
        _reads_declared_arguments(rule, catalog, policy_file)
        if tenants is not None:
            _names_known_tenants(rule, tenants, policy_file)


def _reads_declared_arguments(rule: Rule, catalog: Catalog, policy_file: Path) -> None:
    if rule.names is None or not rule.names.arguments:
        return
    actions = sorted(rule.names.actions if rule.names.actions is not None else catalog)
    declared = set(_properties(catalog[name].arguments for name in actions if name in catalog))
    unknown = sorted(rule.names.arguments - declared)
    if unknown:
        scope = ", ".join(actions) if rule.names.actions is not None else "any action"
        raise RulebookMistake(
            str(policy_file),
            rule.line,
            f"rule {rule.id!r} reads context.args.{unknown[0]}, an argument {scope} does not declare",
        )


def _names_known_tenants(rule: Rule, tenants: Collection[str], policy_file: Path) -> None:
    named = sorted(name for kind, name in (rule.names.entities if rule.names else ()) if kind == "Tenant")
    unknown = [name for name in named if name not in tenants]
    if unknown:
        raise RulebookMistake(
            str(policy_file),
            rule.line,
            f"rule {rule.id!r} names Tenant::{unknown[0]!r}, a tenant VIGIL_ACTIONS__RULEBOOKS does not name",
        )


def _properties(schemas: Iterable[dict[str, Any]]) -> Iterable[str]:
    for schema in schemas:
        properties = schema.get("properties")
        if isinstance(properties, dict):
            yield from properties


def _line(path: Path, key: str, item: str) -> int:
    """The line of ``item`` in the list under the top-level ``key`` of the YAML file ``path`` (0: not found)."""
    try:
        document = yaml.compose(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError):
        return 0
    if not isinstance(document, yaml.MappingNode):
        return 0
    for name, value in document.value:
        if name.value == key and isinstance(value, yaml.SequenceNode):
            found = [node for node in value.value if getattr(node, "value", None) == item]
            return int((found[0] if found else value).start_mark.line) + 1
    return 0
