"""The README, as an operator reads it: every metric vigil exports and every reason it keeps quiet is named there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from vigil.core.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_every_metric_is_documented():
    registry = CollectorRegistry()
    Metrics(registry)
    documented = set(re.findall(r"`(vigil_[a-z_]+)", README))
    exported = set()
    for family in registry.collect():
        # Counters are read as <name>_total; histograms by their own name.
        exported.add(f"{family.name}_total" if family.type == "counter" else family.name)
    assert exported - documented == set(), "add these to the README's Metrics"


def test_every_reason_for_silence_is_documented():
    reasons = set()
    for path in (ROOT / "vigil").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "silence"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                reasons.add(node.args[0].value)
    assert len(reasons) >= 5, reasons  # the walk found the gate's reasons
    assert {r for r in reasons if f"`{r}`" not in README} == set(), "add these to the README's reasons for silence"
