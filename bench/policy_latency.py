"""How long the policy gate takes to decide one action, with a whole rulebook loaded: what an action suggestion
spends in Cedar before it is shown.

    python -m bench.policy_latency [--repeats 5]

Rulebooks: ``demo`` (Brightwave, 17 rules), ``tau2-retail`` (20) and ``tau2-airline`` (30). Requests: for the τ²
rulebooks, every gold write action of every task and every variant of it (``eval.tau2_policy``: half allow, half
deny on many different rules, with the facts a gate sees); for the demo, one request per action and verdict
(allow, needs_approval, each forbid). Each request is decided ``--repeats`` times in shuffled passes after a warm-up
pass; a request's latency is the median of its repeats, and the table gives the median (p50) and p99 of those, per
action and over the rulebook, in milliseconds, timed around ``Rulebook.decide`` (the argument schema check, the
request's conversion, Cedar, and the verdict). The issue's bar: p99 under 5 ms per action.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict

from eval.tau2_data import RULEBOOKS
from eval.tau2_policy import all_cases
from vigil.actions.rulebook import ActionRequest, Rulebook

BAR_MS = 5.0


def demo_requests() -> list[ActionRequest]:
    """Brightwave's actions, each with the facts its rules read, allowed, held and refused."""
    order = {
        "customer_id": "BW-100001",
        "status": "delivered",
        "total_cents": 8000,
        "refundable_cents": 8000,
        "payment_method_id": "PM-VISA1",
    }
    base = {
        "identity_verified": True,
        "confirmed": True,
        "customer": {"id": "BW-100001"},
        "order": order,
        "goodwill": {"last_30_days_cents": 1000},
    }
    refund = {"order_id": "ORD-10001", "amount_cents": 1500, "payment_method_id": "PM-VISA1", "reason": "damaged"}
    address = {"line1": "1 High St", "city": "Leeds", "postcode": "LS1 4AB"}
    shapes = [
        ("refund_order", refund, {}),
        ("refund_order", {**refund, "amount_cents": 6000}, {}),
        ("refund_order", {**refund, "payment_method_id": "PM-OTHER"}, {}),
        ("refund_order", refund, {"identity_verified": False}),
        ("cancel_order", {"order_id": "ORD-10001", "reason": "delayed"}, {"order": {**order, "status": "pending"}}),
        ("cancel_order", {"order_id": "ORD-10001", "reason": "delayed"}, {}),
        ("issue_credit", {"customer_id": "BW-100001", "amount_cents": 2000, "reason": "late"}, {}),
        ("issue_credit", {"customer_id": "BW-100001", "amount_cents": 5500, "reason": "late"}, {}),
        (
            "change_order_address",
            {"order_id": "ORD-10001", "address": address},
            {"order": {**order, "status": "pending"}},
        ),
        ("change_customer_address", {"customer_id": "BW-100001", "address": address}, {}),
        ("change_email", {"customer_id": "BW-100001", "email": "a@example.com"}, {"confirmed": False}),
    ]
    return [
        ActionRequest(action=a, args=args, context={**base, **extra}, tenant="brightwave") for a, args, extra in shapes
    ]


def timed(rulebook: Rulebook, requests: list[ActionRequest], repeats: int) -> dict[int, list[float]]:
    """Each request's latencies in ms, by its index, over ``repeats`` shuffled passes after a warm-up pass."""
    for request in requests:
        rulebook.decide(request)
    took: dict[int, list[float]] = defaultdict(list)
    order = list(range(len(requests)))
    shuffler = random.Random(14)
    for _ in range(repeats):
        shuffler.shuffle(order)
        for index in order:
            started = time.perf_counter()
            rulebook.decide(requests[index])
            took[index].append((time.perf_counter() - started) * 1000)
    return took


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else values[0]


def rows(name: str, requests: list[ActionRequest], repeats: int) -> list[str]:
    """The table's rows for one rulebook: each action, then all of them."""
    rulebook = Rulebook.load(RULEBOOKS / name)
    took = timed(rulebook, requests, repeats)
    per_request = {index: statistics.median(values) for index, values in took.items()}
    by_action: dict[str, list[float]] = defaultdict(list)
    for index, ms in per_request.items():
        by_action[requests[index].action].append(ms)
    out = []
    for action, values in sorted(by_action.items()):
        out.append(f"| {name} | `{action}` | {len(values)} | {statistics.median(values):.3f} | {_p99(values):.3f} |")
    everything = list(per_request.values())
    out.append(
        f"| **{name}** | all ({len(rulebook.policy.rules)} rules) | {len(everything)} | "
        f"{statistics.median(everything):.3f} | {_p99(everything):.3f} |"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Time every rulebook's requests and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=5, help="times each request is decided (default: 5)")
    args = parser.parse_args(argv)
    print("| rulebook | action | requests | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|")
    for line in rows("demo", demo_requests(), args.repeats):
        print(line)
    for domain in ("retail", "airline"):
        requests = [case.request for case in all_cases(domain, None)[1]]
        for line in rows(f"tau2-{domain}", requests, args.repeats):
            print(line)
    print(f"\nbar: p99 under {BAR_MS:.0f} ms per action")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
