"""The demo's systems (orders, billing, CRM) over HTTP for the action tests: seeded, with faults a test may switch
on, and the refunds billing holds read back from their SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vigil.app.settings import Settings
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


def settings(shop: Shop, db_url: str, *, rulebook: str = "demo") -> Settings:
    """vigil's settings for the action tests: the database ``db_url``, actions on against ``shop`` under
    ``rulebook``, answers and progress off."""
    systems = {name: {"base_url": shop.url, "timeout_s": 5} for name in ("orders", "billing", "crm")}
    return Settings(
        _env_file=None,
        database={"url": db_url},
        answers={"enabled": False},
        progress={"enabled": False},
        actions={"systems": systems, "rulebooks": {"*": rulebook}},
    )


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[Shop]:
    db, faults = tmp_path / "systems.sqlite", Faults()
    seed(db, now=SystemClock().now())
    async with SystemsServer(db, faults=faults) as server:
        yield Shop(server.url, db, faults)
