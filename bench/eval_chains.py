"""The conjunctive-risk guard (issue 14) on the team's chains: dangerous ones caught, harmless ones let through.

    python -m bench.eval_chains --split dev|test|all [--errors] [--rules knowledge/rulebooks/demo/risk.yaml]

Data: ``bench/data/chains.yaml`` (bench/data/README.md says how it was written). Each sequence is replayed in order:
every step is proposed to the guard with the steps before it as history (with the status each step ended with),
and the first block ends the sequence. A dangerous sequence is caught when any of its steps is blocked; a harmless
one is wrongly blocked when any step is. A row is in ``dev`` when the sha1 of its id is even, else ``test``.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from vigil.actions.risk import ActionRecord, Guard, RiskMatch

DATA = Path(__file__).resolve().parent / "data" / "chains.yaml"
RULES = Path(__file__).resolve().parent.parent / "knowledge" / "rulebooks" / "demo" / "risk.yaml"
BASE = datetime(2026, 3, 2, tzinfo=UTC)
ACTIONS = (
    "refund_order",
    "cancel_order",
    "issue_credit",
    "change_order_address",
    "change_customer_address",
    "change_email",
    "reset_two_factor",
    "add_payment_method",
)
_TAKES_CUSTOMER = frozenset(ACTIONS) - {"refund_order", "cancel_order", "change_order_address"}
_REASONS = {"refund_order": "damaged item", "cancel_order": "no_longer_needed", "issue_credit": "goodwill"}


def split_of(row_id: str) -> str:
    """``dev`` or ``test``: a stable hash of the id, fixed before any pattern was tuned."""
    return "dev" if int(hashlib.sha1(row_id.encode()).hexdigest(), 16) % 2 == 0 else "test"


def load(split: str, path: Path = DATA) -> list[dict[str, Any]]:
    """The sequences of ``split`` (``dev``, ``test`` or ``all``)."""
    rows: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [row for row in rows if split == "all" or split_of(row["id"]) == split]


def when(text: str) -> datetime:
    """``d3 14:05``: three days after 2 March 2026, at 14:05 UTC."""
    day, clock = text.split()
    hours, minutes = clock.split(":")
    return BASE + timedelta(days=int(day.removeprefix("d")), hours=int(hours), minutes=int(minutes))


def records(row: dict[str, Any]) -> list[ActionRecord]:
    """The row's steps as records, with the status each one ended with (``executed`` unless given)."""
    out = []
    for number, step in enumerate(row["steps"]):
        at, conversation, name, arguments, *rest = step
        facts = rest[0] if rest else {}
        status = rest[1] if len(rest) > 1 else "executed"
        arguments = dict(arguments)
        if name in _TAKES_CUSTOMER:
            arguments.setdefault("customer_id", row.get("customer", "BW-100001"))
        if name in _REASONS:
            arguments.setdefault("reason", _REASONS[name])
        customer = arguments.get("customer_id", row.get("customer", "BW-100001"))
        out.append(
            ActionRecord(
                f"{row['id']}-{number}", f"{row['id']}-{conversation}", customer, "brightwave", name,
                arguments, status, when(at), facts,
            )
        )  # fmt: skip
    return out


@dataclass(frozen=True, slots=True)
class Outcome:
    """Where a sequence was blocked (the step's number and the match), if it was."""

    step: int | None
    match: RiskMatch | None


def replay(guard: Guard, row: dict[str, Any]) -> Outcome:
    """Propose each step in turn with the earlier ones as history; stop at the first block."""
    steps = records(row)
    for number, record in enumerate(steps):
        proposed = ActionRecord(**{**_fields(record), "status": "suggested"})
        match = guard.check(proposed, steps[:number])
        if match is not None:
            return Outcome(number, match)
    return Outcome(None, None)


def _fields(record: ActionRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in ActionRecord.__slots__}


def evaluate(guard: Guard, rows: Sequence[dict[str, Any]], errors: bool = False) -> tuple[int, int, int, int]:
    """``(caught, dangerous, wrongly blocked, harmless)``; with ``errors``, prints each sequence scored wrong."""
    caught = dangerous = blocked = harmless = 0
    for row in rows:
        outcome = replay(guard, row)
        hit = outcome.match is not None
        if row["dangerous"]:
            dangerous += 1
            caught += hit
        else:
            harmless += 1
            blocked += hit
        if errors and hit != row["dangerous"]:
            which = f"blocked at step {outcome.step} by {outcome.match.pattern.name}" if outcome.match else "missed"
            print(f"{row['id']} ({'dangerous' if row['dangerous'] else 'harmless'}: {row.get('note', '')}): {which}")
    return caught, dangerous, blocked, harmless


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    parser.add_argument("--rules", type=Path, default=RULES)
    parser.add_argument("--errors", action="store_true", help="print each sequence scored wrong")
    args = parser.parse_args(argv)
    guard = Guard.from_file(args.rules, ACTIONS)
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    for split in splits:
        caught, dangerous, blocked, harmless = evaluate(guard, load(split), args.errors)
        print(
            f"split {split}: caught {caught}/{dangerous} dangerous chains; "
            f"wrongly blocked {blocked}/{harmless} harmless sequences ({blocked / max(harmless, 1):.1%})"
        )


if __name__ == "__main__":
    main()
