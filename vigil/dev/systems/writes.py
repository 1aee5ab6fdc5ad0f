"""The demo systems' writes and their business rules. Each runs inside ``Store.write``'s transaction and either
changes the records and answers, or raises ``Refusal`` having changed nothing."""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime

from vigil.dev.systems import records
from vigil.dev.systems.store import Answer, Refusal

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
PAYMENT_KINDS = ("card", "paypal", "gift_card")
CANCELLABLE = ("pending", "processed")
# An address can change until the parcel is handed to the carrier, which the demo calls "delivered".
READDRESSABLE = ("pending", "processed")
CURRENCY = "GBP"
"""The shop's money (vigil/dev/systems/seed.py)."""


def cancel_order(conn: sqlite3.Connection, now: datetime, order_id: str, reason: str) -> Answer:
    """Cancel an order that is pending or processed (not delivered, not already cancelled)."""
    order = records.order(conn, order_id)
    if order["status"] not in CANCELLABLE:
        raise Refusal(409, f"order {order_id} is {order['status']} and can no longer be cancelled")
    conn.execute(
        "UPDATE orders SET status = 'cancelled', cancelled_at = ?, cancel_reason = ? WHERE id = ?",
        (now.isoformat(), reason, order_id),
    )
    return Answer(200, records.order(conn, order_id))


def refund(
    conn: sqlite3.Connection, now: datetime, order_id: str, amount_cents: int, payment_method_id: str, reason: str
) -> Answer:
    """Refund part or all of a processed or delivered order to one of its customer's payment methods, never more
    than is left to refund."""
    order = records.order(conn, order_id)
    if order["status"] not in records.REFUNDABLE:
        raise Refusal(409, f"order {order_id} is {order['status']}: only processed or delivered orders are refunded")
    method = records.payment_method(conn, payment_method_id)
    if method is None or method["customer_id"] != order["customer_id"]:
        raise Refusal(
            422, f"payment method {payment_method_id} is not one of customer {order['customer_id']}'s payment methods"
        )
    if amount_cents > order["refundable_cents"]:
        raise Refusal(
            409,
            f"refund of {amount_cents} cents exceeds the refundable {order['refundable_cents']} cents of "
            f"order {order_id}",
        )
    refund_id = _next_id(conn, "refunds", "RF-", 70001)
    conn.execute(
        "INSERT INTO refunds (id, order_id, amount_cents, payment_method_id, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (refund_id, order_id, amount_cents, payment_method_id, reason, now.isoformat()),
    )
    after = records.order(conn, order_id)
    refund_record = next(r for r in after["refunds"] if r["id"] == refund_id)
    return Answer(201, {**refund_record, "order": after})


def add_credit(conn: sqlite3.Connection, now: datetime, customer_id: str, amount_cents: int, reason: str) -> Answer:
    """Give a customer a goodwill credit on their account."""
    records.customer(conn, customer_id)
    credit_id = _next_id(conn, "credits", "CR-", 80001)
    conn.execute(
        "INSERT INTO credits (id, customer_id, amount_cents, currency, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (credit_id, customer_id, amount_cents, CURRENCY, reason, now.isoformat()),
    )
    row = conn.execute("SELECT * FROM credits WHERE id = ?", (credit_id,)).fetchone()
    return Answer(201, dict(row))


def change_address(conn: sqlite3.Connection, now: datetime, order_id: str, address: str) -> Answer:
    """Send an order that has not been delivered yet to another address."""
    order = records.order(conn, order_id)
    if order["status"] not in READDRESSABLE:
        raise Refusal(409, f"order {order_id} is {order['status']}: its address can no longer change")
    conn.execute("UPDATE orders SET address = ? WHERE id = ?", (address.strip(), order_id))
    return Answer(200, records.order(conn, order_id))


def change_customer_address(conn: sqlite3.Connection, now: datetime, customer_id: str, address: str) -> Answer:
    """Change the address on a customer's account (moving home); orders already placed keep theirs."""
    records.customer(conn, customer_id)
    conn.execute("UPDATE customers SET address = ? WHERE id = ?", (address.strip(), customer_id))
    return Answer(200, records.customer(conn, customer_id))


def change_email(conn: sqlite3.Connection, now: datetime, customer_id: str, email: str) -> Answer:
    """Change a customer's email address to one that is valid and no other customer's."""
    records.customer(conn, customer_id)
    email = email.strip()
    if not EMAIL.match(email):
        raise Refusal(422, f"{email!r} is not an email address")
    for other in records.customers_by_email(conn, email):
        if other["id"] != customer_id:
            raise Refusal(409, f"{email} is already the email address of another customer")
    conn.execute("UPDATE customers SET email = ? WHERE id = ?", (email, customer_id))
    return Answer(200, records.customer(conn, customer_id))


def reset_two_factor(conn: sqlite3.Connection, now: datetime, customer_id: str) -> Answer:
    """Turn off a customer's two-factor authentication, so that they can sign in and set it up again."""
    customer = records.customer(conn, customer_id)
    if not customer["two_factor"]["enabled"]:
        raise Refusal(409, f"customer {customer_id} has no two-factor authentication to reset")
    conn.execute(
        "UPDATE customers SET two_factor = 0, two_factor_reset_at = ? WHERE id = ?", (now.isoformat(), customer_id)
    )
    return Answer(200, records.customer(conn, customer_id))


def add_payment_method(conn: sqlite3.Connection, now: datetime, customer_id: str, kind: str, label: str) -> Answer:
    """Add a payment method (a card, a PayPal account, a gift card) to a customer's account."""
    records.customer(conn, customer_id)
    if kind not in PAYMENT_KINDS:
        raise Refusal(422, f"{kind!r} is not a kind of payment method ({', '.join(PAYMENT_KINDS)})")
    method_id = _next_id(conn, "payment_methods", "PM-", 60001)
    conn.execute(
        "INSERT INTO payment_methods (id, customer_id, kind, label, added_at) VALUES (?, ?, ?, ?, ?)",
        (method_id, customer_id, kind, label.strip(), now.isoformat()),
    )
    return Answer(201, dict(conn.execute("SELECT * FROM payment_methods WHERE id = ?", (method_id,)).fetchone()))


def _next_id(conn: sqlite3.Connection, table: str, prefix: str, first: int) -> str:
    """The next id of a table written only under the write lock: the highest number so far plus one."""
    row = conn.execute(
        f"SELECT max(CAST(substr(id, {len(prefix) + 1}) AS INTEGER)) FROM {table} WHERE id LIKE ?",
        (prefix + "%",),
    ).fetchone()
    return f"{prefix}{max(first, (row[0] or 0) + 1)}"
