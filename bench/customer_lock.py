"""What the lock per customer costs: the transaction that suggests an action (read the customer's recent actions,
insert one) without a lock, under the ``customer_lock`` row (vigil/cases/locks.py), and on PostgreSQL under
``pg_advisory_xact_lock`` instead, on SQLite and PostgreSQL.

    python -m bench.customer_lock [--transactions 400] [--tasks 1,8] [--databases sqlite,postgresql]

``--tasks`` transactions run at once, each task for customers of its own (50, in turn), so on PostgreSQL no task
waits for another's lock (on SQLite every write waits for the one writer whatever the lock). Each variant runs in
turn on the same database, three rounds in alternation; the median round's transactions per second and mean
milliseconds are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bench.databases import KINDS, fresh
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.cases.locks import lock_customer
from vigil.db.engine import create_engine, migrate

T0 = datetime(2026, 12, 1, tzinfo=UTC)
CUSTOMERS = 50
"""Each task's customers, in turn: a history of a few actions each, as a customer has."""
Lock = Callable[[AsyncConnection, str], Awaitable[None]]


async def _none(conn: AsyncConnection, customer: str) -> None:
    return None


async def _row(conn: AsyncConnection, customer: str) -> None:
    await lock_customer(conn, "acme", customer, at=T0)


async def _advisory(conn: AsyncConnection, customer: str) -> None:
    await conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"acme/{customer}"})


def _action(customer: str) -> ActionRecord:
    arguments = {"order_id": f"ORD-{customer}", "amount_cents": 4500}
    digest = arguments_hash("refund_order", arguments)
    return ActionRecord(
        action_id=action_id(uuid.uuid4().hex, digest),
        conversation_id=uuid.uuid4().hex,
        tenant="acme",
        name="refund_order",
        arguments=arguments,
        arguments_hash=digest,
        verdict="needs_approval",
        rule="bench",
        reason="bench",
        status="suggested",
        suggested_at=T0,
        customer_id=customer,
    )


async def _suggest(engine: AsyncEngine, lock: Lock, customer: str) -> None:
    async with engine.begin() as conn:
        await lock(conn, customer)
        await stored.history(conn, "acme", customer, since=T0 - timedelta(days=60), statuses=("suggested",))
        await stored.insert(conn, _action(customer))


async def _round(engine: AsyncEngine, lock: Lock, transactions: int, tasks: int) -> float:
    async def worker(n: int) -> None:
        for i in range(transactions // tasks):
            await _suggest(engine, lock, f"CUS-{n}-{i % CUSTOMERS}")

    began = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(tasks)))
    return (transactions // tasks) * tasks / (time.perf_counter() - began)


async def measure(url: str, transactions: int, tasks: int) -> dict[str, float]:
    engine = create_engine(url, pool_size=max(tasks, 2), data_dir=Path(tempfile.gettempdir()))
    variants: dict[str, Lock] = {"no lock": _none, "customer_lock row": _row}
    if engine.dialect.name == "postgresql":
        variants["pg_advisory_xact_lock"] = _advisory
    try:
        await migrate(engine)
        rates: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(3):
            for name, lock in variants.items():
                rates[name].append(await _round(engine, lock, transactions, tasks))
        return {name: statistics.median(r) for name, r in rates.items()}
    finally:
        await engine.dispose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--tasks", default="1,8")
    parser.add_argument("--databases", default=",".join(KINDS))
    args = parser.parse_args(argv)
    for kind in args.databases.split(","):
        for tasks in (int(t) for t in args.tasks.split(",")):
            with tempfile.TemporaryDirectory() as workdir, fresh(kind, Path(workdir)) as url:
                rates = asyncio.run(measure(url, args.transactions, tasks))
            shown = ", ".join(f"{name} {rate:.0f}/s ({1000 / rate * tasks:.2f} ms)" for name, rate in rates.items())
            print(f"{kind}, {tasks} at once: {shown}", flush=True)


if __name__ == "__main__":
    main()
