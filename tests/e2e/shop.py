"""The demo systems (orders, billing, CRM) for end-to-end tests of actions: served on a thread of their own, so that
the daemon's calls are answered while the test blocks on Kafka, with accounts a test adds and what the systems hold
read back from their SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.core.clock import SystemClock
from vigil.dev.systems.faults import Faults
from vigil.dev.systems.seed import seed
from vigil.dev.systems.server import SystemsServer

_START_S = 15.0


@dataclass(frozen=True)
class Order:
    """An order a test adds: its status, total and the payment method it was paid with, and what was refunded."""

    id: str
    customer_id: str
    status: str
    total_cents: int
    payment_method_id: str
    refunded_cents: int = 0


class ShopFile:
    """The demo systems' SQLite file: accounts a test adds, and what the systems hold, read back. ``url`` is where
    they answer once served (``Shop`` on a thread of the test's process, ``tests.e2e.crashes.SystemsProcess`` in a
    process of their own)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.url = ""

    def systems(self, timeout_s: float = 5.0) -> str:
        """``VIGIL_ACTIONS__SYSTEMS`` pointing every system of the demo rulebook here."""
        return json.dumps(
            {name: {"base_url": self.url, "timeout_s": timeout_s} for name in ("orders", "billing", "crm")}
        )

    # Accounts a test adds (the seed's docstring lists the demo's own).

    def add_customer(
        self,
        customer_id: str,
        *,
        name: str | None = None,
        address: str = "1 Test Street, Leeds LS1 1AA",
        methods: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """A customer with two-factor on and the payment methods ``methods`` (id -> kind, label, days since added)."""
        now = SystemClock().now()
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO customers (id, name, email, zip, address, two_factor) VALUES (?, ?, ?, ?, ?, 1)",
                (customer_id, name or f"Customer {customer_id}", self.email_of_fixture(customer_id), "LS1", address),
            )
            for method_id, method in (methods or {}).items():
                added = now - timedelta(days=float(method.get("days", 400)))
                conn.execute(
                    "INSERT INTO payment_methods (id, customer_id, kind, label, added_at) VALUES (?, ?, ?, ?, ?)",
                    (
                        method_id,
                        customer_id,
                        method.get("kind", "card"),
                        method.get("label", "Visa"),
                        added.isoformat(),
                    ),
                )

    def add_order(self, order: Order) -> None:
        now = SystemClock().now()
        items = [{"sku": "SKU-TEST", "name": "test item", "qty": 1, "price_cents": order.total_cents}]
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO orders (id, customer_id, status, items, total_cents, currency, payment_method_id, "
                "address, placed_at) VALUES (?, ?, ?, ?, ?, 'GBP', ?, '1 Test Street, Leeds LS1 1AA', ?)",
                (
                    order.id,
                    order.customer_id,
                    order.status,
                    json.dumps(items),
                    order.total_cents,
                    order.payment_method_id,
                    (now - timedelta(days=3)).isoformat(),
                ),
            )
            if order.refunded_cents:
                conn.execute(
                    "INSERT INTO refunds (id, order_id, amount_cents, payment_method_id, reason, created_at) "
                    "VALUES (?, ?, ?, ?, 'before the test', ?)",
                    (f"RF-{order.id}", order.id, order.refunded_cents, order.payment_method_id, now.isoformat()),
                )

    @staticmethod
    def email_of_fixture(customer_id: str) -> str:
        return f"{customer_id.lower()}@example.com"

    # What the systems hold now.

    def query(self, sql: str, *params: object) -> list[sqlite3.Row]:
        with self._connect() as conn:
            return conn.execute(sql, params).fetchall()

    def refunds(self, order_id: str, *, since_test: bool = True) -> list[int]:
        """The refunds on ``order_id``, oldest first (without those the test made before it began)."""
        rows = self.query("SELECT id, amount_cents FROM refunds WHERE order_id = ? ORDER BY created_at, id", order_id)
        return [r["amount_cents"] for r in rows if not (since_test and r["id"] == f"RF-{order_id}")]

    def credits(self, customer_id: str) -> list[int]:
        rows = self.query("SELECT amount_cents FROM credits WHERE customer_id = ? ORDER BY created_at, id", customer_id)
        return [r["amount_cents"] for r in rows]

    def customer(self, customer_id: str) -> sqlite3.Row:
        return self.query("SELECT * FROM customers WHERE id = ?", customer_id)[0]

    def methods(self, customer_id: str) -> list[str]:
        return [r["id"] for r in self.query("SELECT id FROM payment_methods WHERE customer_id = ?", customer_id)]

    def order(self, order_id: str) -> sqlite3.Row:
        return self.query("SELECT * FROM orders WHERE id = ?", order_id)[0]

    @contextlib.contextmanager
    def _connect(self) -> Any:
        conn = sqlite3.connect(self.db, timeout=10, isolation_level=None)
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        finally:
            conn.close()


class Shop(ShopFile):
    """The demo systems on a loopback port, seeded, with faults a test may switch on (``faults``)."""

    def __init__(self, db: Path) -> None:
        super().__init__(db)
        self.faults = Faults()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="demo-systems", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> Shop:
        seed(self.db, now=SystemClock().now())
        self._thread.start()
        if not self._ready.wait(_START_S) or self._error is not None:
            raise RuntimeError(f"the demo systems did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_START_S)

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with SystemsServer(self.db, faults=self.faults) as server:
            self.url = server.url
            self._ready.set()
            await self._stop.wait()


def stamp(moment: datetime) -> str:
    """RFC 3339, as the wire takes it."""
    return moment.isoformat().replace("+00:00", "Z")
