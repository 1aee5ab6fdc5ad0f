"""The policy gate on τ²-bench retail and airline: do the gold actions pass, and is each broken rule named?

For every task's gold write actions (``eval.tau2_retail``, ``eval.tau2_airline`` build the requests, the facts
from the database with the task's earlier gold actions applied), the rulebook ``tau2-retail`` or ``tau2-airline``
decides. A gold action passes on ``allow`` or ``needs_approval``. Each variant breaks one rule and must be denied
naming it. Per rule: recall is the share of its variants it stopped; precision the share of the requests denied
under its name that were its variants (a variant stopped under another rule, or a gold action denied, counts
against both rules).

    python -m eval.tau2_policy --domain retail|airline [--split test|train|all] [--json OUT] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval import tau2_airline_variants, tau2_retail
from eval.tau2_data import PASS, RULEBOOKS, TAU2, Case, load_db, load_tasks
from vigil.actions.rulebook import Rulebook

REJECTED = tau2_retail.REJECTED
BUILDERS = {"retail": tau2_retail.cases, "airline": tau2_airline_variants.cases}


@dataclass(slots=True)
class Outcome:
    """One case and what the rulebook said."""

    case: Case
    said: str
    """``PASS`` when the verdict is allow or needs_approval, else the rule that denied it."""


@dataclass(slots=True)
class Report:
    """The evaluation of one domain and split."""

    domain: str
    split: str
    tasks: int
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def gold(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.case.expected == PASS]

    @property
    def gold_passed(self) -> int:
        return sum(o.said == PASS for o in self.gold)

    @property
    def variants(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.case.expected != PASS]

    def per_rule(self) -> dict[str, dict[str, float]]:
        """Each rule's variants, denials under its name, hits, precision and recall."""
        expected = Counter(o.case.expected for o in self.variants)
        said = Counter(o.said for o in self.outcomes if o.said != PASS)
        hits = Counter(o.said for o in self.variants if o.said == o.case.expected)
        rows = {}
        for rule in sorted(set(expected) | set(said)):
            rows[rule] = {
                "variants": expected[rule],
                "denied": said[rule],
                "hits": hits[rule],
                "precision": hits[rule] / said[rule] if said[rule] else 0.0,
                "recall": hits[rule] / expected[rule] if expected[rule] else 0.0,
            }
        return rows

    def to_json(self) -> dict[str, Any]:
        """The numbers, and every case that went wrong."""
        return {
            "domain": self.domain,
            "split": self.split,
            "tasks": self.tasks,
            "gold_actions": len(self.gold),
            "gold_passed": self.gold_passed,
            "variants": len(self.variants),
            "variants_named": sum(o.said == o.case.expected for o in self.variants),
            "rules": self.per_rule(),
            "misses": [_miss(o) for o in self.outcomes if o.said != o.case.expected],
        }


def _miss(outcome: Outcome) -> dict[str, Any]:
    case = outcome.case
    return {
        "task": case.task,
        "action": case.request.action,
        "variant": case.variant,
        "expected": case.expected,
        "said": outcome.said,
    }


def decide(rulebook: Rulebook, cases: Iterable[Case]) -> Iterator[Outcome]:
    """Each case's verdict, as ``PASS`` or the denying rule."""
    for case in cases:
        verdict = rulebook.decide(case.request)
        yield Outcome(case, PASS if verdict.outcome != "deny" else verdict.rule)


def all_cases(domain: str, split: str | None, root: Path = TAU2) -> tuple[int, list[Case]]:
    """The number of tasks of ``split`` and the cases their gold actions make."""
    db = load_db(domain, root)
    tasks = load_tasks(domain, split, root)
    build = BUILDERS[domain]
    return len(tasks), [case for task in tasks for case in build(task, db)]


def evaluate(domain: str, split: str | None, root: Path = TAU2) -> Report:
    """Build the cases of ``domain``'s ``split`` and decide them with the domain's rulebook."""
    rulebook = Rulebook.load(RULEBOOKS / f"tau2-{domain}")
    count, cases = all_cases(domain, split, root)
    return Report(domain, split or "all", count, list(decide(rulebook, cases)))


def table(report: Report) -> str:
    """The report as Markdown: the gold line, then precision and recall per rule."""
    rejected = [o for o in report.variants if o.case.variant == REJECTED]
    variants = [o for o in report.variants if o.case.variant != REJECTED]
    named = sum(o.said == o.case.expected for o in variants)
    refused = f"; gold calls tau2's own tool rejects, denied {sum(o.said == o.case.expected for o in rejected)}/"
    lines = [
        f"**{report.domain}, {report.split} split** ({report.tasks} tasks): gold write actions passing "
        f"{report.gold_passed}/{len(report.gold)}{refused + str(len(rejected)) if rejected else ''}; "
        f"variants stopped by the right rule {named}/{len(variants)}.",
        "",
        "| rule | variants | denied under it | right | precision | recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for rule, row in report.per_rule().items():
        lines.append(
            f"| `{rule}` | {row['variants']} | {row['denied']} | {row['hits']} | "
            f"{row['precision']:.3f} | {row['recall']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Evaluate one domain and split, print the table (and the misses, and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--domain", choices=sorted(BUILDERS), required=True)
    parser.add_argument("--split", choices=["test", "train", "all"], default="test")
    parser.add_argument("--data", type=Path, default=TAU2, help=f"the tau2 data (default: {TAU2})")
    parser.add_argument("--misses", action="store_true", help="list every case the rulebook got wrong")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    report = evaluate(args.domain, None if args.split == "all" else args.split, args.data)
    print(table(report))
    if args.misses:
        for miss in report.to_json()["misses"]:
            print(json.dumps(miss))
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
