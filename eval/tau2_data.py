"""τ²-bench's retail and airline data, as the policy evaluation reads it: the database, the tasks and their split.

Source: ``../shared/data/tau2/{retail,airline}/`` (sierra-research/tau2-bench, MIT): ``db.json.gz`` (users, orders
and products; users, flights and reservations), ``tasks.json`` (each task's gold actions, the tool calls a correct
agent makes, in order) and ``split_tasks.json`` (train and test task ids). ``VIGIL_SHARED_DATA`` says where the
shared data is when the repository is not beside it (a worktree).

A ``Case`` is one request to decide and what the rulebook must say: ``PASS`` for a gold action (allow or
needs_approval), else the id of the rule that must stop it.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil.actions.rulebook import ActionRequest

ROOT = Path(__file__).resolve().parent.parent
# Beside the repository (../shared/data), or beside the worktrees' parent (a worktree in ../wt/NAME).
SHARED = Path(
    os.environ.get("VIGIL_SHARED_DATA")
    or next((p for p in (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data") if p.is_dir()), "")
    or ROOT.parent / "shared" / "data"
)
TAU2 = SHARED / "tau2"
RULEBOOKS = ROOT / "knowledge" / "rulebooks"
PASS = "pass"
"""A gold action's expectation: the gate lets it through (allow or needs_approval)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One request and what the rulebook must say about it."""

    task: str
    variant: str
    """``gold``, or the name of the one change that breaks a rule."""
    expected: str
    """``PASS``, or the rule that must stop it."""
    request: ActionRequest


@dataclass(slots=True)
class Task:
    """A task's id, the user's instructions (the conversation's facts come from them) and its gold actions."""

    id: str
    instructions: str
    actions: list[dict[str, Any]]


def cents(dollars: float) -> int:
    """Dollars as integer cents (Cedar has no decimals)."""
    return round(dollars * 100)


def load_db(domain: str, root: Path = TAU2) -> dict[str, Any]:
    """The domain's database as it is before any task."""
    with gzip.open(root / domain / "db.json.gz", "rt", encoding="utf-8") as stream:
        db: dict[str, Any] = json.load(stream)
    return db


def load_tasks(domain: str, split: str | None, root: Path = TAU2) -> list[Task]:
    """The tasks of ``split`` (``train``, ``test``; ``None`` for all), in the file's order."""
    tasks = json.loads((root / domain / "tasks.json").read_text("utf-8"))
    wanted = None
    if split is not None:
        wanted = set(json.loads((root / domain / "split_tasks.json").read_text("utf-8"))[split])
    out = []
    for task in tasks:
        if wanted is not None and task["id"] not in wanted:
            continue
        scenario = task["user_scenario"]["instructions"]
        text = " ".join(str(scenario.get(key) or "") for key in ("reason_for_call", "known_info", "task_instructions"))
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        out.append(Task(task["id"], text, actions))
    return out


def fresh(db: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``db`` a task's gold actions may change."""
    return copy.deepcopy(dict(db))


def chooser(*key: str) -> random.Random:
    """A random source fixed by ``key`` (task and action), so variants are the same on every run."""
    return random.Random(zlib.crc32("/".join(key).encode()))


def request(action: str, args: Mapping[str, Any], context: Mapping[str, Any]) -> ActionRequest:
    """The request as vigil's gate receives it."""
    return ActionRequest(action=action, args=dict(args), context=dict(context), tenant="tau2")


def variant(
    base: Case,
    name: str,
    expected: str,
    *,
    args: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Case:
    """``base`` with its arguments or facts replaced (merged over the gold ones), expected to be stopped."""
    merged_args = {**base.request.args, **(args or {})}
    merged_context = {**base.request.context, **(context or {})}
    return Case(base.task, name, expected, request(base.request.action, merged_args, merged_context))


def gold_writes(task: Task, writes: frozenset[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The task's gold write actions, with their place in the task."""
    for position, action in enumerate(task.actions):
        if action["name"] in writes:
            yield position, action
