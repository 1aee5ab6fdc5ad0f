"""How long the conjunctive-risk guard takes to check one proposed action against 10,000 past actions of one customer.

    python -m bench.guard [--past 10000] [--proposals 300] [--repeats 5]

Brightwave's ``risk.yaml`` (12 patterns) checks proposals of every action kind (refunds to the original card and
to another one, credits, cancellations, address, e-mail and 2FA changes, new payment methods) against one customer's
history, built with a fixed seed in a realistic mix: mostly refunds on many orders, then credits, cancellations,
address changes, and a few security changes; mostly executed, some rejected, pending or expired. Two histories:
``spread``, the 10,000 actions over two years (the guard drops those outside its longest window, 60 days), and
``window``, all 10,000 inside the window (the worst case: every pattern sees every record). The time is the call to
``Guard.check``, in process; each repeat times every proposal once, and the median of the repeats' p50 and p99 is
reported, with how many proposals were blocked.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bench.eval_chains import ACTIONS, RULES
from vigil.actions.risk import ActionRecord, Guard

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MIX = [  # (action, weight)
    ("refund_order", 40),
    ("issue_credit", 15),
    ("cancel_order", 10),
    ("change_order_address", 10),
    ("change_customer_address", 6),
    ("change_email", 5),
    ("reset_two_factor", 4),
    ("add_payment_method", 10),
]
STATUSES = [("executed", 80), ("rejected", 8), ("suggested", 4), ("approved", 3), ("expired", 3), ("failed", 2)]
ADDRESS = {"line1": "1 High St", "city": "Leeds", "postcode": "LS1 1AA"}


def _pick(rng: random.Random, weighted: Sequence[tuple[str, int]]) -> str:
    return rng.choices([name for name, _ in weighted], weights=[w for _, w in weighted])[0]


def action(rng: random.Random, number: int, name: str, at: datetime, status: str) -> ActionRecord:
    """One action of customer BW-100001 with plausible arguments and facts."""
    order = f"ORD-{rng.randrange(10_000, 99_999)}"
    original = rng.random() < 0.95
    arguments: dict[str, object] = {"customer_id": "BW-100001"}
    facts: dict[str, object] = {}
    if name == "refund_order":
        method = "PM-1" if original else f"PM-{rng.randrange(2, 40)}"
        arguments = {"order_id": order, "amount_cents": rng.randrange(300, 9000), "payment_method_id": method}
        facts = {"payment_method_original": original, "payment_method_added_at": (at - timedelta(days=90)).isoformat()}
    elif name == "cancel_order":
        arguments, facts = {"order_id": order}, {"refunds_payment": rng.random() < 0.7}
    elif name == "change_order_address":
        arguments = {"order_id": order, "address": ADDRESS}
    elif name == "change_customer_address":
        arguments["address"] = ADDRESS
    elif name == "issue_credit":
        arguments["amount_cents"] = rng.randrange(200, 3000)
    elif name == "change_email":
        arguments["email"] = f"user{number}@example.com"
    elif name == "add_payment_method":
        arguments.update(kind="card", label=f"Visa {number % 10_000:04d}")
        facts = {"payment_method_id": f"PM-N{number}"}
    conversation = f"c{number // 3}"  # about three actions per conversation
    return ActionRecord(f"a{number}", conversation, "BW-100001", "brightwave", name, arguments, status, at, facts)  # type: ignore[arg-type]


def history(rng: random.Random, past: int, span: timedelta) -> list[ActionRecord]:
    """``past`` actions spread evenly at random over ``span`` before NOW."""
    seconds = span.total_seconds()
    return [
        action(rng, n, _pick(rng, MIX), NOW - timedelta(seconds=rng.uniform(60, seconds)), _pick(rng, STATUSES))
        for n in range(past)
    ]


def proposals(rng: random.Random, count: int) -> list[ActionRecord]:
    """``count`` proposals at NOW, of every kind in the mix's proportions."""
    return [action(rng, 1_000_000 + n, _pick(rng, MIX), NOW, "suggested") for n in range(count)]


def run(guard: Guard, past: list[ActionRecord], proposed: list[ActionRecord]) -> tuple[float, float, int]:
    """p50 and p99 in milliseconds over one pass of the proposals, and how many were blocked."""
    times, blocked = [], 0
    for record in proposed:
        began = time.perf_counter()
        match = guard.check(record, past)
        times.append((time.perf_counter() - began) * 1000)
        blocked += match is not None
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))], blocked


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--past", type=int, default=10_000)
    parser.add_argument("--proposals", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    guard = Guard.from_file(RULES, ACTIONS)
    for label, span in (("spread", timedelta(days=730)), ("window", timedelta(seconds=guard.window_s))):
        rng = random.Random(14)
        past, proposed = history(rng, args.past, span), proposals(rng, args.proposals)
        in_window = sum(r.at >= NOW - timedelta(seconds=guard.window_s) for r in past)
        results = [run(guard, past, proposed) for _ in range(args.repeats)]
        p50 = statistics.median(r[0] for r in results)
        p99 = statistics.median(r[1] for r in results)
        print(
            f"{label}: {args.past} past actions ({in_window} within {guard.window_s / 86400:g} days), "
            f"{args.proposals} proposals x {args.repeats}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
            f"blocked {results[0][2]}/{args.proposals}"
        )


if __name__ == "__main__":
    main()
