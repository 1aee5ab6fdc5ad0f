"""What a ``policy.cedar`` says beyond its verdicts, for the checks made when a rulebook loads: where each rule is
(its line, for an error a person can go to) and what it names (the entities ``Role::"lead"``, ``Tenant::"acme"``,
the actions of its scope, the arguments it reads as ``context.args.<name>``).

Cedar's JSON form of a policy set (``cedarpy.policies_to_json_str``) says what each rule names but not where it is;
the lines are found in the text, outside comments and strings, where each rule's ``permit`` or ``forbid`` is (Cedar
numbers the policies in that order: ``policy0``, ``policy1``...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_EFFECT = re.compile(r"\b(?:permit|forbid)\s*\(")
_ANNOTATION = re.compile(r"@[A-Za-z_]\w*")


@dataclass(frozen=True, slots=True)
class Span:
    """Where one rule is in the text: its first line (its first annotation's) and its characters."""

    line: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Mentions:
    """What one rule names."""

    actions: frozenset[str] | None
    """The actions its scope names; None: every action."""
    entities: frozenset[tuple[str, str]]
    """Each ``(type, id)`` it names, in its scope or its conditions (``("Role", "lead")``)."""
    entity_types: frozenset[str]
    """Every entity type it names, with those of ``is`` tests."""
    arguments: frozenset[str]
    """What it reads of ``context.args`` (``context.args.amount_cents``, ``context.args has note``)."""


def spans(text: str, count: int) -> list[Span]:
    """Where each of the ``count`` rules of ``text`` is, in order (a rule not found: line 0)."""
    bare = _blanked(text, strings=True)
    effects = [m.start() for m in _EFFECT.finditer(bare)]
    if len(effects) != count:  # not as Cedar parsed it: lines unknown rather than wrong
        return [Span(0, 0, len(text))] * count
    found: list[Span] = []
    previous_end = 0
    for effect in effects:
        end = bare.find(";", effect)  # a rule ends at its semicolon: the only one outside comments and strings
        end = len(text) if end < 0 else end + 1
        annotation = _ANNOTATION.search(bare, previous_end, effect)
        start = annotation.start() if annotation else effect
        found.append(Span(text.count("\n", 0, start) + 1, start, end))
        previous_end = end
    return found


def line_in(text: str, span: Span, needle: str) -> int:
    """The line of ``needle`` in the rule at ``span`` (outside comments), else the rule's own line."""
    at = _blanked(text, strings=False).find(needle, span.start, span.end)
    return span.line if at < 0 else text.count("\n", 0, at) + 1


def mentions(policy: Mapping[str, Any]) -> Mentions:
    """What ``policy`` (one rule in Cedar's JSON form) names."""
    scope = policy.get("action", {})
    if scope.get("op") == "All":
        actions = None
    else:
        named = [scope["entity"]] if "entity" in scope else scope.get("entities", [])
        actions = frozenset(e["id"] for e in named if e.get("type") == "Action")
    entities = set(_entities(policy))
    types = {kind for kind, _ in entities} | set(_entity_types(policy))
    return Mentions(actions, frozenset(entities), frozenset(types), frozenset(_arguments(policy)))


def _nodes(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _entities(policy: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for node in _nodes({k: v for k, v in policy.items() if k != "annotations"}):
        if isinstance(node.get("type"), str) and isinstance(node.get("id"), str) and len(node) == 2:
            yield node["type"], node["id"]


def _entity_types(policy: Mapping[str, Any]) -> Iterator[str]:
    for node in _nodes({k: v for k, v in policy.items() if k != "annotations"}):
        if isinstance(node.get("entity_type"), str):
            yield node["entity_type"]


def _arguments(policy: Mapping[str, Any]) -> Iterator[str]:
    for node in _nodes(policy.get("conditions", [])):
        for op in (".", "has"):
            read = node.get(op)
            if isinstance(read, Mapping) and _is_context_args(read.get("left")) and isinstance(read.get("attr"), str):
                yield read["attr"]


def _is_context_args(node: Any) -> bool:
    read = node.get(".") if isinstance(node, Mapping) else None
    return isinstance(read, Mapping) and read.get("left") == {"Var": "context"} and read.get("attr") == "args"


def _blanked(text: str, *, strings: bool) -> str:
    """``text`` with its comments (and, if ``strings``, what is inside its strings) turned to spaces, lines kept."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
        elif text[i] == '"':
            i += 1
            while i < n and text[i] != '"':
                step = 2 if text[i] == "\\" else 1
                if strings:
                    for j in range(i, min(i + step, n)):
                        out[j] = " " if text[j] != "\n" else "\n"
                i += step
            i += 1
        else:
            i += 1
    return "".join(out)
