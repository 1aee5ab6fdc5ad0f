"""The demo systems' records as their HTTP API shows them: a customer with their payment methods, an order with its
items and refunds, a customer's goodwill credits. Money is in integer minor units (pence: every order and credit
names its currency); times are ISO 8601 in UTC."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from vigil.dev.systems.store import Refusal

REFUNDABLE = ("processed", "delivered")


def customer(conn: sqlite3.Connection, customer_id: str) -> dict[str, Any]:
    """The customer and their payment methods (oldest first); 404 if there is none with this id."""
    row = conn.execute("SELECT * FROM customers WHERE id = ?", (customer_id,)).fetchone()
    if row is None:
        raise Refusal(404, f"no customer {customer_id}")
    return _customer(conn, row)


def customers_by_email(conn: sqlite3.Connection, email: str) -> list[dict[str, Any]]:
    """The customers with this email address, compared without regard to case (none, or one)."""
    rows = conn.execute("SELECT * FROM customers WHERE lower(email) = lower(?) ORDER BY id", (email.strip(),))
    return [_customer(conn, row) for row in rows.fetchall()]


def payment_method(conn: sqlite3.Connection, payment_method_id: str) -> dict[str, Any] | None:
    """One payment method, with the customer it belongs to."""
    row = conn.execute("SELECT * FROM payment_methods WHERE id = ?", (payment_method_id,)).fetchone()
    return dict(row) if row is not None else None


def orders_of(conn: sqlite3.Connection, customer_id: str) -> list[dict[str, Any]]:
    """The customer's orders, newest first; 404 if there is no such customer."""
    customer(conn, customer_id)
    rows = conn.execute(
        "SELECT id FROM orders WHERE customer_id = ? ORDER BY placed_at DESC, id DESC", (customer_id,)
    ).fetchall()
    return [order(conn, row["id"]) for row in rows]


def order(conn: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    """The order with its items, its refunds so far and what can still be refunded; 404 if there is none."""
    row = conn.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
    if row is None:
        raise Refusal(404, f"no order {order_id}")
    refunds = [
        dict(r) for r in conn.execute("SELECT * FROM refunds WHERE order_id = ? ORDER BY created_at, id", (order_id,))
    ]
    refunded = sum(r["amount_cents"] for r in refunds)
    return {
        "id": row["id"],
        "customer_id": row["customer_id"],
        "status": row["status"],
        "items": json.loads(row["items"]),
        "total_cents": row["total_cents"],
        "currency": row["currency"],
        "payment_method_id": row["payment_method_id"],
        "shipping_address": row["address"],
        "placed_at": row["placed_at"],
        "cancelled_at": row["cancelled_at"],
        "cancel_reason": row["cancel_reason"],
        "refunded_cents": refunded,
        "refundable_cents": row["total_cents"] - refunded if row["status"] in REFUNDABLE else 0,
        "refunds": refunds,
    }


def credits_of(conn: sqlite3.Connection, customer_id: str) -> dict[str, Any]:
    """The customer's goodwill credits, oldest first, and their sum; 404 if there is no such customer."""
    customer(conn, customer_id)
    rows = conn.execute("SELECT * FROM credits WHERE customer_id = ? ORDER BY created_at, id", (customer_id,))
    credits = [dict(r) for r in rows.fetchall()]
    return {
        "customer_id": customer_id,
        "credits": credits,
        "total_cents": sum(c["amount_cents"] for c in credits),
    }


def _customer(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    methods = conn.execute(
        "SELECT id, kind, label, added_at FROM payment_methods WHERE customer_id = ? ORDER BY added_at, id",
        (row["id"],),
    ).fetchall()
    return {
        "id": row["id"],
        "name": row["name"],
        "email": row["email"],
        "postcode": row["zip"],  # stored as zip by the first demo files, which a restarted demo keeps
        "address": row["address"],
        "two_factor": {"enabled": bool(row["two_factor"]), "reset_at": row["two_factor_reset_at"]},
        "payment_methods": [dict(m) for m in methods],
    }
