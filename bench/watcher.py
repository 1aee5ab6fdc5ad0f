"""End-to-end latency: when each new message becomes visible in the case store, against when it was sent.

A thread polls the ``message`` table every ``interval_s`` for rows past the highest ``seq`` seen. A row first
returned by a query that started at ``t`` was committed before ``t`` and after the previous query started, so
``t - sent_at`` overstates the produce-to-stored latency by at most one interval plus a query. ``sent_at`` is
the producer's clock and ``t`` the benchmark's: the same machine clock. vigil has one writer committing batches
in order, so rows become visible in ``seq`` order and none is skipped.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import sqlalchemy as sa

from bench.databases import plain_url

_NEWER = "SELECT seq, sent_at, received_at FROM message WHERE seq > {p} ORDER BY seq"
_NEWEST = "SELECT coalesce(max(seq), 0) FROM message"


class StoreWatcher(threading.Thread):
    """Collects, per new message, seconds from ``sent_at`` to visible and from ``sent_at`` to ``received_at``."""

    def __init__(self, db_url: str, *, interval_s: float = 0.01) -> None:
        super().__init__(name="bench-store-watcher", daemon=True)
        self._sqlite = sa.make_url(db_url).get_backend_name() == "sqlite"
        self._url = plain_url(db_url)
        self._interval_s = interval_s
        self._stopping = threading.Event()
        self.to_visible_s: list[float] = []
        self.to_received_s: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self._connect()
            try:
                self._poll(conn)
            finally:
                conn.close()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        """Stop polling and wait for the thread; re-raise what it failed on."""
        self._stopping.set()
        self.join()
        if self.error is not None:
            raise self.error

    def _poll(self, conn: Any) -> None:
        placeholder = "?" if self._sqlite else "%s"
        last = int(conn.execute(_NEWEST).fetchone()[0])
        while True:
            final = self._stopping.is_set()  # one more poll after stop(), so that nothing committed is missed
            started = time.time()
            rows = conn.execute(_NEWER.format(p=placeholder), (last,)).fetchall()
            for seq, sent_at, received_at in rows:
                sent = self._timestamp(sent_at)
                self.to_visible_s.append(started - sent)
                self.to_received_s.append(self._timestamp(received_at) - sent)
                last = seq
            if final:
                return
            self._stopping.wait(self._interval_s)

    def _connect(self) -> Any:
        if self._sqlite:
            return sqlite3.connect(f"file:{self._url}?mode=ro", uri=True, isolation_level=None)
        return psycopg.connect(self._url, autocommit=True)

    def _timestamp(self, value: datetime | str) -> float:
        if isinstance(value, str):  # SQLite keeps UTC text without a zone
            value = datetime.fromisoformat(value).replace(tzinfo=UTC)
        return value.timestamp()
