"""The conjunctive-risk guard the daemon's way: a proposed action checked against one customer's 10,000 past actions
read from the ``action`` table, on SQLite and PostgreSQL.

    python -m bench.guard_stored [--past 10000] [--proposals 200] [--repeats 3] [--databases sqlite,postgresql]

The histories and proposals are ``bench.guard``'s (the same seed and mix; ``spread`` over two years, ``window`` all
inside the guard's 60 days), stored as rows of ``action`` for customer BW-100001. The time is one call of
``StoredGuard.check``: the indexed read of the customer's actions within the window
(``ix_action_customer_suggested_at``), turning the rows into the guard's records, and the check. Each repeat times
every proposal once; the median of the repeats' p50 and p99 is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from bench import guard as inmemory
from bench.databases import KINDS, fresh
from bench.eval_chains import ACTIONS, RULES
from vigil.actions import risk
from vigil.actions.history import StoredGuard
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, arguments_hash
from vigil.db.engine import create_engine, migrate


def as_row(record: risk.ActionRecord) -> ActionRecord:
    """A guard's record as the ``action`` table holds it (its risk facts as the facts the policy was given)."""
    order: dict[str, object] = {}
    facts = dict(record.facts)
    if record.name == "refund_order":
        method = record.arguments.get("payment_method_id")
        order = {"payment_method_id": method if facts.get("payment_method_original") else "PM-1"}
    return ActionRecord(
        action_id=record.action_id,
        conversation_id=record.conversation_id,
        tenant=record.tenant,
        name=record.name,
        arguments=dict(record.arguments),
        arguments_hash=arguments_hash(record.name, record.arguments),
        verdict="allow",
        rule="bench",
        reason="bench",
        status=record.status,
        suggested_at=record.at,
        customer_id=record.customer_id,
        facts={"order": order} if order else {},
        result={"id": facts["payment_method_id"]} if "payment_method_id" in facts else None,
    )


async def measure(
    url: str, past: list[risk.ActionRecord], proposed: list[risk.ActionRecord], repeats: int
) -> tuple[float, float]:
    engine = create_engine(url, pool_size=2, data_dir=Path(tempfile.gettempdir()))
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            for record in past:
                await stored.insert(conn, as_row(record))
        checker = StoredGuard(risk.Guard.from_file(RULES, ACTIONS))
        rows = [as_row(r) for r in proposed]
        results = []
        for _ in range(repeats):
            times = []
            for row in rows:
                began = time.perf_counter()
                async with engine.connect() as conn:
                    await checker.check(conn, row)
                times.append((time.perf_counter() - began) * 1000)
            times.sort()
            results.append((statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]))
        return statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)
    finally:
        await engine.dispose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--past", type=int, default=10_000)
    parser.add_argument("--proposals", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--databases", default=",".join(KINDS))
    args = parser.parse_args(argv)
    window = timedelta(seconds=risk.Guard.from_file(RULES, ACTIONS).window_s)
    for kind in args.databases.split(","):
        for label, span in (("spread", timedelta(days=730)), ("window", window)):
            rng = inmemory.random.Random(14)
            past, proposed = inmemory.history(rng, args.past, span), inmemory.proposals(rng, args.proposals)
            with tempfile.TemporaryDirectory() as workdir, fresh(kind, Path(workdir)) as url:
                p50, p99 = asyncio.run(measure(url, past, proposed, args.repeats))
            print(
                f"{kind} {label}: {args.past} past actions, {args.proposals} proposals x {args.repeats}: "
                f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
