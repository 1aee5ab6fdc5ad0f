"""Actions under policy: the actions a case calls for (a refund, a credit, an address change), suggested with their
arguments traced to where they came from, decided by a Cedar policy, held for approval when they move money,
blocked when they complete a dangerous chain, kept inside a concession budget, and executed at most once through
the company's systems."""

from __future__ import annotations
