"""The company's systems that vigil's actions run against, for `vigil demo` and the tests: a small web shop's order
system, billing and CRM in one HTTP service with its own SQLite file (``app``), its demo data (``seed``), and a
server to run it inside an asyncio loop (``server``) or on its own (``python -m vigil.dev.systems``)."""

from __future__ import annotations
