"""The demo systems' SQLite file: its schema, the records as the HTTP API shows them, and the one way to write.

A write runs its effect and stores its idempotency record in the same ``BEGIN IMMEDIATE`` transaction: a request
retried with the same key after the first one committed finds the record and is answered with the first response,
and one retried while the first still runs waits for the write lock and then finds it too.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from vigil.core.clock import Clock

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, zip TEXT NOT NULL, address TEXT NOT NULL,
    two_factor INTEGER NOT NULL, two_factor_reset_at TEXT
);
CREATE TABLE IF NOT EXISTS payment_methods (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id), kind TEXT NOT NULL,
    label TEXT NOT NULL, added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id), status TEXT NOT NULL,
    items TEXT NOT NULL, total_cents INTEGER NOT NULL, currency TEXT NOT NULL,
    payment_method_id TEXT NOT NULL REFERENCES payment_methods(id), address TEXT NOT NULL, placed_at TEXT NOT NULL,
    cancelled_at TEXT, cancel_reason TEXT
);
CREATE TABLE IF NOT EXISTS refunds (
    id TEXT PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders(id), amount_cents INTEGER NOT NULL,
    payment_method_id TEXT NOT NULL REFERENCES payment_methods(id), reason TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS credits (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id), amount_cents INTEGER NOT NULL,
    currency TEXT NOT NULL, reason TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, response TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


class Refusal(Exception):
    """The system says no: an HTTP status (404, 409, 422) and a ``detail`` a person can read."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Answer:
    """What a write answered; ``replayed`` when it is the stored answer to an earlier request with the same key."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


Effect = Callable[[sqlite3.Connection, datetime], Answer]


class Store:
    """The file, opened afresh for each request (requests run on worker threads; SQLite serialises the writes)."""

    def __init__(self, path: Path, *, clock: Clock) -> None:
        self.path = path
        self.clock = clock

    def create(self) -> None:
        """Create the tables if they are missing (WAL, so that reads do not wait for a write)."""
        with contextlib.closing(self._connect()) as conn:
            create_schema(conn)

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads."""
        with contextlib.closing(self._connect()) as conn:
            yield conn

    def write(self, key: str, fingerprint: str, effect: Effect) -> Answer:
        """Run ``effect`` once per idempotency ``key``: a new key runs it and stores its answer (a refusal too) in
        the same transaction; a known key with the same ``fingerprint`` replays the stored answer; a known key with
        another fingerprint is refused with 422 and nothing is done."""
        with contextlib.closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                answer = self._once(conn, key, fingerprint, effect)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return answer

    def _once(self, conn: sqlite3.Connection, key: str, fingerprint: str, effect: Effect) -> Answer:
        stored = conn.execute("SELECT fingerprint, status, response FROM idempotency WHERE key = ?", (key,)).fetchone()
        if stored is not None:
            if stored["fingerprint"] != fingerprint:
                detail = f"the Idempotency-Key {key!r} was already used for a different request"
                return Answer(422, {"detail": detail})
            return Answer(stored["status"], json.loads(stored["response"]), replayed=True)
        now = self.clock.now()
        conn.execute("SAVEPOINT effect")
        try:
            answer = effect(conn, now)
        except Refusal as refusal:
            conn.execute("ROLLBACK TO effect")
            answer = Answer(refusal.status, {"detail": refusal.detail})
        conn.execute("RELEASE effect")
        conn.execute(
            "INSERT INTO idempotency (key, fingerprint, status, response, created_at) VALUES (?, ?, ?, ?, ?)",
            (key, fingerprint, answer.status, json.dumps(answer.body), now.isoformat()),
        )
        return answer

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables if they are missing (WAL, so that reads do not wait for a write)."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are begun explicitly), rows by column name, foreign keys on."""
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    return conn
