"""The demo systems' data: a small British web shop's customers, payment methods, orders, refunds and credits (the
shop Brightwave's analysts serve in the demo, whose policy speaks of pounds).

The data is the same on every run; its times are set back from the moment it is seeded (``now``), so that "an order
placed yesterday" and "a card added six hours ago" stay true in a demo. Prices in pence (every record says
``"currency": "GBP"``); addresses in the UK, with their postcodes.

Customers (``*`` two-factor authentication on):

    CUS-1001 Maria Keller    maria.keller@example.com   *  PM-5001 Visa 4242, PM-5002 PayPal
    CUS-1002 James Okafor    james.okafor@example.com      PM-5003 Mastercard 5100; credit CR-80001 £10
    CUS-1003 Sofia Alvarez   sofia.alvarez@example.com  *  PM-5004 Visa 1881
    CUS-1004 Liam Chen       liam.chen@example.com      *  PM-5005 Amex 0005, PM-5006 gift card added 1 day ago
    CUS-1005 Priya Nair      priya.nair@example.com        PM-5007 Visa 3056
    CUS-1006 Noah Williams   noah.williams@example.com  *  PM-5008 Mastercard 4444
    CUS-1007 Emma Schulz     emma.schulz@example.com       PM-5009 PayPal
    CUS-1008 Daniel Rossi    daniel.rossi@example.com   *  PM-5010 Visa 9424, PM-5011 Visa 6011 added 6 hours ago;
                                                           credits CR-80002 £25 and CR-80003 £15
    CUS-1009 Aisha Bello     aisha.bello@example.com    *  PM-5012 Mastercard 2223
    CUS-1010 Lucas Martin    lucas.martin@example.com      PM-5013 Visa 8812
    CUS-1011 Hannah Kim      hannah.kim@example.com     *  PM-5014 Amex 1009
    CUS-1012 Omar Haddad     omar.haddad@example.com    *  PM-5015 Visa 7020, PM-5016 PayPal (another person's
                                                           address, omar.h.payments@example.net) added 2 days ago

Orders (days since placed; refundable is what is left to refund):

    ORD-10001 CUS-1001 delivered  45d  headphones                     £89.99
    ORD-10002 CUS-1001 delivered  12d  keyboard, 2 cables             £154.98; RF-70001 £12.99 (damaged cable)
    ORD-10003 CUS-1001 pending    12h  laptop stand                   £39.00 (PayPal)
    ORD-10004 CUS-1002 delivered  20d  monitor                        £279.00
    ORD-10005 CUS-1002 processed   2d  mouse, cable                   £62.49
    ORD-10006 CUS-1003 delivered   8d  speaker                        £74.50
    ORD-10007 CUS-1003 cancelled  30d  webcam                         £69.00
    ORD-10008 CUS-1003 pending     1d  2 chargers                     £69.98
    ORD-10009 CUS-1004 delivered  15d  backpack, cable                £71.99
    ORD-10010 CUS-1004 processed   1d  headphones                     £89.99, paid with the new gift card PM-5006
    ORD-10011 CUS-1005 delivered  60d  keyboard                       £129.00
    ORD-10012 CUS-1005 delivered   5d  webcam, laptop stand           £108.00
    ORD-10013 CUS-1005 pending     5h  2 mice                         £99.00
    ORD-10014 CUS-1006 processed   3d  monitor                        £279.00
    ORD-10015 CUS-1006 delivered  25d  charger                        £34.99; RF-70003 £34.99 (never arrived), 0 left
    ORD-10016 CUS-1007 delivered  10d  speaker, cable                 £87.49
    ORD-10017 CUS-1007 cancelled  14d  headphones                     £89.99
    ORD-10018 CUS-1007 pending    19h  backpack                       £59.00
    ORD-10019 CUS-1008 delivered  40d  2 monitors                     £558.00; RF-70002 £279.00, £279.00 left
    ORD-10020 CUS-1008 processed   7h  2 headphones, charger          £214.97, paid with the new card PM-5011
    ORD-10021 CUS-1009 delivered   9d  laptop stand, mouse            £88.50
    ORD-10022 CUS-1009 processed   2d  keyboard                       £129.00
    ORD-10023 CUS-1010 delivered  18d  webcam                         £69.00
    ORD-10024 CUS-1010 cancelled   7d  2 speakers                     £149.00
    ORD-10025 CUS-1010 pending     2h  3 cables                       £38.97
    ORD-10026 CUS-1011 delivered   6d  headphones, charger            £124.98
    ORD-10027 CUS-1011 processed  36h  backpack                       £59.00
    ORD-10028 CUS-1012 delivered  28d  keyboard, mouse                £178.50
    ORD-10029 CUS-1012 processed  12h  monitor                        £279.00, paid with the new PayPal PM-5016
    ORD-10030 CUS-1012 cancelled   3d  laptop stand                   £39.00

New refunds are numbered from RF-70004, credits from CR-80004, payment methods from PM-60001.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

from vigil.dev.systems.store import connect, create_schema

CATALOG = {
    "SKU-HP01": ("Wireless headphones", 8999),
    "SKU-KB02": ("Mechanical keyboard", 12900),
    "SKU-MS03": ("Ergonomic mouse", 4950),
    "SKU-CB04": ("USB-C cable, 2 m", 1299),
    "SKU-LS05": ("Laptop stand", 3900),
    "SKU-WC06": ("Webcam 1080p", 6900),
    "SKU-MN07": ("27-inch monitor", 27900),
    "SKU-CH08": ("Phone charger, 65 W", 3499),
    "SKU-BG09": ("Laptop backpack", 5900),
    "SKU-SP10": ("Bluetooth speaker", 7450),
}

# id, name, email, postcode, address, two-factor on
CUSTOMERS = [
    ("CUS-1001", "Maria Keller", "maria.keller@example.com", "N1 9GU", "14 Upper Street, London N1 9GU", 1),
    ("CUS-1002", "James Okafor", "james.okafor@example.com", "M4 1HN", "27 Oldham Street, Manchester M4 1HN", 0),
    ("CUS-1003", "Sofia Alvarez", "sofia.alvarez@example.com", "BS1 5TR", "8 Park Row, Bristol BS1 5TR", 1),
    ("CUS-1004", "Liam Chen", "liam.chen@example.com", "LS1 6DL", "41 Briggate, Leeds LS1 6DL", 1),
    ("CUS-1005", "Priya Nair", "priya.nair@example.com", "CB2 1RH", "12 Trumpington Street, Cambridge CB2 1RH", 0),
    ("CUS-1006", "Noah Williams", "noah.williams@example.com", "B5 4BU", "90 Bristol Street, Birmingham B5 4BU", 1),
    ("CUS-1007", "Emma Schulz", "emma.schulz@example.com", "EH1 1QS", "3 Cockburn Street, Edinburgh EH1 1QS", 0),
    ("CUS-1008", "Daniel Rossi", "daniel.rossi@example.com", "SE1 9SG", "55 Southwark Street, London SE1 9SG", 1),
    ("CUS-1009", "Aisha Bello", "aisha.bello@example.com", "NE1 6RD", "17 Grey Street, Newcastle NE1 6RD", 1),
    ("CUS-1010", "Lucas Martin", "lucas.martin@example.com", "L1 4DQ", "62 Bold Street, Liverpool L1 4DQ", 0),
    ("CUS-1011", "Hannah Kim", "hannah.kim@example.com", "G1 2BB", "230 Buchanan Street, Glasgow G1 2BB", 1),
    ("CUS-1012", "Omar Haddad", "omar.haddad@example.com", "CF10 1FA", "9 Queen Street, Cardiff CF10 1FA", 1),
]

# id, customer, kind, label, days since added
PAYMENT_METHODS = [
    ("PM-5001", "CUS-1001", "card", "Visa ending 4242", 720),
    ("PM-5002", "CUS-1001", "paypal", "PayPal maria.keller@example.com", 300),
    ("PM-5003", "CUS-1002", "card", "Mastercard ending 5100", 540),
    ("PM-5004", "CUS-1003", "card", "Visa ending 1881", 410),
    ("PM-5005", "CUS-1004", "card", "Amex ending 0005", 880),
    ("PM-5006", "CUS-1004", "gift_card", "Gift card ending 7731", 1),
    ("PM-5007", "CUS-1005", "card", "Visa ending 3056", 260),
    ("PM-5008", "CUS-1006", "card", "Mastercard ending 4444", 615),
    ("PM-5009", "CUS-1007", "paypal", "PayPal emma.schulz@example.com", 190),
    ("PM-5010", "CUS-1008", "card", "Visa ending 9424", 1020),
    ("PM-5011", "CUS-1008", "card", "Visa ending 6011", 0.25),
    ("PM-5012", "CUS-1009", "card", "Mastercard ending 2223", 350),
    ("PM-5013", "CUS-1010", "card", "Visa ending 8812", 150),
    ("PM-5014", "CUS-1011", "card", "Amex ending 1009", 480),
    ("PM-5015", "CUS-1012", "card", "Visa ending 7020", 700),
    ("PM-5016", "CUS-1012", "paypal", "PayPal omar.h.payments@example.net", 2),
]

# id, customer, status, days since placed, items as (sku, quantity), payment method
ORDERS = [
    ("ORD-10001", "CUS-1001", "delivered", 45, [("SKU-HP01", 1)], "PM-5001"),
    ("ORD-10002", "CUS-1001", "delivered", 12, [("SKU-KB02", 1), ("SKU-CB04", 2)], "PM-5001"),
    ("ORD-10003", "CUS-1001", "pending", 0.5, [("SKU-LS05", 1)], "PM-5002"),
    ("ORD-10004", "CUS-1002", "delivered", 20, [("SKU-MN07", 1)], "PM-5003"),
    ("ORD-10005", "CUS-1002", "processed", 2, [("SKU-MS03", 1), ("SKU-CB04", 1)], "PM-5003"),
    ("ORD-10006", "CUS-1003", "delivered", 8, [("SKU-SP10", 1)], "PM-5004"),
    ("ORD-10007", "CUS-1003", "cancelled", 30, [("SKU-WC06", 1)], "PM-5004"),
    ("ORD-10008", "CUS-1003", "pending", 1, [("SKU-CH08", 2)], "PM-5004"),
    ("ORD-10009", "CUS-1004", "delivered", 15, [("SKU-BG09", 1), ("SKU-CB04", 1)], "PM-5005"),
    ("ORD-10010", "CUS-1004", "processed", 1, [("SKU-HP01", 1)], "PM-5006"),
    ("ORD-10011", "CUS-1005", "delivered", 60, [("SKU-KB02", 1)], "PM-5007"),
    ("ORD-10012", "CUS-1005", "delivered", 5, [("SKU-WC06", 1), ("SKU-LS05", 1)], "PM-5007"),
    ("ORD-10013", "CUS-1005", "pending", 0.2, [("SKU-MS03", 2)], "PM-5007"),
    ("ORD-10014", "CUS-1006", "processed", 3, [("SKU-MN07", 1)], "PM-5008"),
    ("ORD-10015", "CUS-1006", "delivered", 25, [("SKU-CH08", 1)], "PM-5008"),
    ("ORD-10016", "CUS-1007", "delivered", 10, [("SKU-SP10", 1), ("SKU-CB04", 1)], "PM-5009"),
    ("ORD-10017", "CUS-1007", "cancelled", 14, [("SKU-HP01", 1)], "PM-5009"),
    ("ORD-10018", "CUS-1007", "pending", 0.8, [("SKU-BG09", 1)], "PM-5009"),
    ("ORD-10019", "CUS-1008", "delivered", 40, [("SKU-MN07", 2)], "PM-5010"),
    ("ORD-10020", "CUS-1008", "processed", 0.3, [("SKU-HP01", 2), ("SKU-CH08", 1)], "PM-5011"),
    ("ORD-10021", "CUS-1009", "delivered", 9, [("SKU-LS05", 1), ("SKU-MS03", 1)], "PM-5012"),
    ("ORD-10022", "CUS-1009", "processed", 2, [("SKU-KB02", 1)], "PM-5012"),
    ("ORD-10023", "CUS-1010", "delivered", 18, [("SKU-WC06", 1)], "PM-5013"),
    ("ORD-10024", "CUS-1010", "cancelled", 7, [("SKU-SP10", 2)], "PM-5013"),
    ("ORD-10025", "CUS-1010", "pending", 0.1, [("SKU-CB04", 3)], "PM-5013"),
    ("ORD-10026", "CUS-1011", "delivered", 6, [("SKU-HP01", 1), ("SKU-CH08", 1)], "PM-5014"),
    ("ORD-10027", "CUS-1011", "processed", 1.5, [("SKU-BG09", 1)], "PM-5014"),
    ("ORD-10028", "CUS-1012", "delivered", 28, [("SKU-KB02", 1), ("SKU-MS03", 1)], "PM-5015"),
    ("ORD-10029", "CUS-1012", "processed", 0.5, [("SKU-MN07", 1)], "PM-5016"),
    ("ORD-10030", "CUS-1012", "cancelled", 3, [("SKU-LS05", 1)], "PM-5015"),
]

# id, order, amount, payment method, reason, days ago
REFUNDS = [
    ("RF-70001", "ORD-10002", 1299, "PM-5001", "one cable arrived damaged", 10),
    ("RF-70002", "ORD-10019", 27900, "PM-5010", "one monitor arrived with a cracked screen", 30),
    ("RF-70003", "ORD-10015", 3499, "PM-5008", "the parcel never arrived", 20),
]

# id, customer, amount, reason, days ago
CREDITS = [
    ("CR-80001", "CUS-1002", 1000, "late delivery of ORD-10004", 18),
    ("CR-80002", "CUS-1008", 2500, "goodwill for the cracked monitor in ORD-10019", 30),
    ("CR-80003", "CUS-1008", 1500, "delivery delay", 10),
]


def seed(path: Path, *, now: datetime) -> None:
    """Create the demo systems' file at ``path`` with the data above, its times set back from ``now``.

    Raises:
        FileExistsError: the file already holds customers (seeding twice would mix two shops).
    """
    with contextlib.closing(connect(path)) as conn:
        create_schema(conn)
        if conn.execute("SELECT count(*) FROM customers").fetchone()[0]:
            raise FileExistsError(f"{path} already holds the demo systems' data")
        conn.execute("BEGIN IMMEDIATE")
        _insert(conn, now.replace(microsecond=0))
        conn.execute("COMMIT")


def ensure_seeded(path: Path, *, now: datetime) -> bool:
    """Seed ``path`` unless it already holds data (a demo restarted keeps what its actions changed); True if seeded."""
    try:
        seed(path, now=now)
    except FileExistsError:
        return False
    return True


def _insert(conn: sqlite3.Connection, now: datetime) -> None:
    def ago(days: float) -> str:
        return (now - timedelta(days=days)).isoformat()

    conn.executemany(
        "INSERT INTO customers (id, name, email, zip, address, two_factor) VALUES (?, ?, ?, ?, ?, ?)", CUSTOMERS
    )
    conn.executemany(
        "INSERT INTO payment_methods (id, customer_id, kind, label, added_at) VALUES (?, ?, ?, ?, ?)",
        [(pm, cus, kind, label, ago(days)) for pm, cus, kind, label, days in PAYMENT_METHODS],
    )
    addresses = {c[0]: c[4] for c in CUSTOMERS}
    for order_id, customer_id, status, days, lines, pm in ORDERS:
        items = [
            {"sku": sku, "name": CATALOG[sku][0], "qty": qty, "price_cents": CATALOG[sku][1]} for sku, qty in lines
        ]
        total = sum(qty * CATALOG[sku][1] for sku, qty in lines)
        cancelled = (ago(days - 0.05), "the customer changed their mind") if status == "cancelled" else (None, None)
        conn.execute(
            "INSERT INTO orders (id, customer_id, status, items, total_cents, currency, payment_method_id, address, "
            "placed_at, cancelled_at, cancel_reason) VALUES (?, ?, ?, ?, ?, 'GBP', ?, ?, ?, ?, ?)",
            (
                order_id,
                customer_id,
                status,
                json.dumps(items),
                total,
                pm,
                addresses[customer_id],
                ago(days),
                *cancelled,
            ),
        )
    conn.executemany(
        "INSERT INTO refunds (id, order_id, amount_cents, payment_method_id, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(rf, order, amount, pm, reason, ago(days)) for rf, order, amount, pm, reason, days in REFUNDS],
    )
    conn.executemany(
        "INSERT INTO credits (id, customer_id, amount_cents, currency, reason, created_at) "
        "VALUES (?, ?, ?, 'GBP', ?, ?)",
        [(cr, cus, amount, reason, ago(days)) for cr, cus, amount, reason, days in CREDITS],
    )
