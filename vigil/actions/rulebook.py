"""A rulebook: one company's actions (``actions.yaml``) and the Cedar policy over them (``policy.cedar``), kept
together in one directory, and the one place an action request is decided.

vigil ships three: ``demo`` (Brightwave, the demo company) and the τ²-bench ``tau2-retail`` and ``tau2-airline``
rulebooks, encoded from their published policies (``knowledge/rulebooks/``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from vigil.actions.catalog import Catalog
from vigil.actions.numbers import for_rules
from vigil.actions.policy import Policy, Verdict
from vigil.actions.risk import Guard
from vigil.actions.validation import validate
from vigil.core.errors import InvalidArguments, RulebookError
from vigil.wire.events import ApproverRole

ACTIONS_FILE = "actions.yaml"
POLICY_FILE = "policy.cedar"
RISK_FILE = "risk.yaml"


class ActionRequest(BaseModel):
    """One action to decide on: a line of ``vigil policy check``'s input.

    ``context`` holds the facts the rules read (see the rulebook's ``policy.cedar``); money is integer cents.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    args: dict[str, Any] = Field(default_factory=dict, description="The action's arguments.")
    context: dict[str, Any] = Field(default_factory=dict, description="Facts about the case and the systems.")
    tenant: Annotated[str, StringConstraints(min_length=1, max_length=256)] = "default"
    role: ApproverRole = "analyst"


@dataclass(frozen=True)
class Rulebook:
    """The actions and the policy of one company."""

    name: str
    catalog: Catalog
    policy: Policy
    directory: Path = field(default=Path())
    guard: Guard | None = None
    """The conjunctive-risk guard over ``risk.yaml``'s patterns, when the rulebook has them."""

    @classmethod
    def load(cls, directory: Path, *, tenants: Collection[str] | None = None) -> Rulebook:
        """Read ``directory``'s ``actions.yaml`` and ``policy.cedar`` (checked against ``policy.cedarschema`` when
        there is one), and ``risk.yaml`` when there is one.

        Args:
            tenants: the tenants that exist; a rule naming another stops the load. None: not checked.

        Raises:
            RulebookError: a file is missing or invalid, or the files disagree (``vigil.actions.validation``); a
                mistake is named with its file and line.
        """
        if not directory.is_dir():
            raise RulebookError(f"{directory}: no such rulebook directory")
        catalog = Catalog.load(directory / ACTIONS_FILE)
        policy = Policy.load(directory / POLICY_FILE)
        validate(
            catalog, policy, actions_file=directory / ACTIONS_FILE, policy_file=directory / POLICY_FILE, tenants=tenants
        )
        risk = directory / RISK_FILE
        guard = Guard.from_file(risk, actions=set(catalog)) if risk.is_file() else None
        return cls(directory.name, catalog, policy, directory, guard)

    def decide(self, request: ActionRequest) -> Verdict:
        """The verdict on ``request``: its arguments checked against the action's schema, then the policy asked
        with ``args`` (each number as its field declares it, ``vigil.actions.numbers``) and the context's facts (a
        ``context.args`` of the request's own is replaced). An unknown action or invalid arguments is a ``deny``
        naming why."""
        try:
            spec = self.catalog.check(request.action, request.args)
            return self.policy.decide(
                request.action,
                {**request.context, "args": for_rules(spec, request.args)},
                tenant=request.tenant,
                role=request.role,
                preconditions=self.catalog.preconditions,
            )
        except InvalidArguments as exc:
            return Verdict("deny", exc.reason, exc.detail)


def bundled(directory: Path) -> Mapping[str, Path]:
    """The rulebooks under ``directory`` (``knowledge/rulebooks``), by name."""
    if not directory.is_dir():
        return {}
    return {path.name: path for path in sorted(directory.iterdir()) if (path / POLICY_FILE).is_file()}


def locate(rulebook: str, bundled: Path) -> Path:
    """The directory of ``rulebook``: a bundled rulebook's name (a directory of ``bundled``), else a path."""
    named = bundled / rulebook
    if "/" not in rulebook and (named / POLICY_FILE).is_file():
        return named
    return Path(rulebook)


class Rulebooks:
    """The rulebook of each tenant, loaded once: ``choose(tenant)`` names it (a bundled name or a directory);
    ``tenants`` are those that exist (a rule naming another stops the load; None: not checked)."""

    def __init__(
        self, choose: Callable[[str], str], bundled_dir: Path, *, tenants: Collection[str] | None = None
    ) -> None:
        self._choose = choose
        self._bundled = bundled_dir
        self._tenants = tenants
        self._loaded: dict[Path, Rulebook] = {}

    def of(self, tenant: str) -> Rulebook:
        """``tenant``'s rulebook.

        Raises:
            RulebookError: it cannot be read.
        """
        path = locate(self._choose(tenant), self._bundled)
        book = self._loaded.get(path)
        if book is None:
            book = self._loaded[path] = Rulebook.load(path, tenants=self._tenants)
        return book
