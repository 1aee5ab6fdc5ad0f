"""The demo's systems (orders, billing, CRM) over HTTP for the action tests, seeded, with faults a test may switch
on, and the refunds billing holds read back from their SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vigil.core.clock import SystemClock
from vigil.dev.systems.faults import Faults
from vigil.dev.systems.seed import seed
from vigil.dev.systems.server import SystemsServer


@dataclass
class Shop:
    url: str
    db: Path
    faults: Faults = field(default_factory=Faults)

    def refunds(self, order_id: str) -> list[int]:
        with sqlite3.connect(self.db) as conn:
            return [
                r[0]
                for r in conn.execute("SELECT amount_cents FROM refunds WHERE order_id = ? ORDER BY id", (order_id,))
            ]


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[Shop]:
    db, faults = tmp_path / "systems.sqlite", Faults()
    seed(db, now=SystemClock().now())
    async with SystemsServer(db, faults=faults) as server:
        yield Shop(server.url, db, faults)
