"""Money for people: amounts in minor units (cents, pence) written with their currency, "£62.49", "12.50 CHF".

Every amount vigil handles is a whole number of minor units; every currency it writes has two decimals. The currency
is the tenant's, as its settings name it (an ISO 4217 code); without one, an amount is written bare ("62.49") rather
than with a currency made up.
"""

from __future__ import annotations

import re

CURRENCY = re.compile(r"[A-Z]{3}")
"""An ISO 4217 code."""
SYMBOLS = {"GBP": "£", "USD": "$", "EUR": "€", "CAD": "CA$", "AUD": "A$", "NZD": "NZ$", "INR": "₹"}
"""The currencies written with a sign; any other is written with its code after the amount."""


def currency_problem(code: str) -> str | None:
    """Why ``code`` is not a currency vigil can write, or None when it is one."""
    if not CURRENCY.fullmatch(code):
        return f"{code!r} is not an ISO 4217 currency code (e.g. GBP, USD, EUR)"
    return None


def amount(cents: int) -> str:
    """Minor units with thousands grouped and no currency: 1234567 -> "12,345.67"."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{part:02d}"


def money(cents: int, currency: str | None) -> str:
    """``cents`` in ``currency``: "£62.49", "-$10.00", "12.50 CHF"; without a currency, "62.49"."""
    if currency is None:
        return amount(cents)
    symbol = SYMBOLS.get(currency)
    if symbol is None:
        return f"{amount(cents)} {currency}"
    return f"-{symbol}{amount(-cents)}" if cents < 0 else f"{symbol}{amount(cents)}"
