"""Live updates across replicas, through PostgreSQL's LISTEN/NOTIFY.

With several replicas, each handles the conversations of its own partitions, while an analyst's browser talks to
whichever replica the load balancer picked. Every replica therefore NOTIFYs what its pipeline stored or published
on one channel and LISTENs to the others, handing what it hears to its own ``LiveFeed``. Best effort, like the
feed itself: updates wait for the connection in a bounded queue (beyond it they are dropped), updates NOTIFYed
while another replica was disconnected never reach it, and a browser resynchronises from the API when its stream
reconnects. Updates are encoded in the relay's task, not in the pipeline's call. A NOTIFY payload holds at most
8000 bytes: a longer message text is cut, and marked ``truncated`` so the panel fetches the whole conversation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import asyncpg
import sqlalchemy as sa

from vigil.core.errors import StoreUnavailable
from vigil.core.retry import Backoff
from vigil.flow.feed import LiveFeed, Update

log = logging.getLogger(__name__)

CHANNEL = "vigil_live"
APPLICATION_NAME = "vigil-fanout"
MAX_PAYLOAD_BYTES = 7900  # PostgreSQL's limit is 8000
_BATCH = 200
_SEND = f"SELECT pg_notify('{CHANNEL}', payload) FROM unnest($1::text[]) AS payload"


def asyncpg_dsn(url: str) -> str:
    """The plain PostgreSQL DSN of a SQLAlchemy URL (``postgresql+asyncpg://`` or ``+psycopg``)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def encode(update: Update, origin: str) -> str:
    """The NOTIFY payload of an update; a text too long to fit is cut and its part marked ``truncated``."""
    head = _json({"o": origin, "k": update.kind, "t": update.tenant, "c": update.conversation_id})[:-1]
    payload = f'{head},"d":{update.json}}}'  # the data as the local subscribers get it, encoded once
    excess = len(payload.encode()) - MAX_PAYLOAD_BYTES
    if excess <= 0:
        return payload
    data = json.loads(update.json)  # a copy to cut
    for part in ("message", "suggestion", "feedback"):
        text = (data.get(part) or {}).get("text")
        if isinstance(text, str) and len(_json(text).encode()) > excess:
            room = max(0, len(_json(text).encode()) - 2 - excess - 64)
            data[part]["text"] = text[: _fitting(text, room)]
            data[part]["truncated"] = True
            return f'{head},"d":{_json(data)}}}'
    raise ValueError(f"a {update.kind} update does not fit in a NOTIFY payload")


def _fitting(text: str, room: int) -> int:
    """The longest prefix of ``text`` (in characters) whose JSON string fits in ``room`` bytes, escapes included
    and quotes not: a binary search, since the size only grows with the prefix."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_json(text[:middle]).encode()) - 2 <= room:
            low = middle
        else:
            high = middle - 1
    return low


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode(payload: str) -> tuple[str, Update] | None:
    """The origin and update of a payload; None if it is not one of ours."""
    try:
        body: dict[str, Any] = json.loads(payload)
        return body["o"], Update(body["k"], body["t"], body["c"], body["d"])
    except (ValueError, KeyError, TypeError):
        return None


class Fanout:
    """Relays this replica's live updates to the others and theirs to this one's feed."""

    def __init__(self, url: str, feed: LiveFeed, *, backoff: Backoff, max_queue: int = 10_000) -> None:
        self._dsn = asyncpg_dsn(url)
        self._feed = feed
        self._backoff = backoff
        self.origin = uuid.uuid4().hex
        self._outgoing: asyncio.Queue[Update] = asyncio.Queue(max_queue)
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.connections = 0
        """How many times it has connected (a reconnect counts)."""

    def send(self, update: Update) -> None:
        """Queue ``update`` for the other replicas (dropped, with a log line, if the queue is full)."""
        try:
            self._outgoing.put_nowait(update)
        except asyncio.QueueFull:
            log.warning("live fan-out queue full; an update is not relayed to other replicas")

    def start(self) -> None:
        """Connect and relay in the background until ``close``."""
        self._task = asyncio.create_task(self._run(), name="vigil-fanout")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            connection = await self._backoff.retry("connecting the live fan-out", self._connect)
            try:
                self.connected.set()
                await self._relay(connection)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("live fan-out lost its connection (%s); reconnecting", exc)
            except Exception:  # a bug must not end the relay for the life of the process
                log.exception("live fan-out failed; reconnecting")
            finally:
                self.connected.clear()
                connection.terminate()

    async def _connect(self) -> asyncpg.Connection:
        try:
            connection = await asyncpg.connect(
                self._dsn, timeout=5, server_settings={"application_name": APPLICATION_NAME}
            )
            await connection.add_listener(CHANNEL, self._heard)
            self.connections += 1
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            raise StoreUnavailable(f"live fan-out cannot connect: {exc}") from exc
        return connection

    async def _relay(self, connection: asyncpg.Connection) -> None:
        lost = asyncio.Event()
        connection.add_termination_listener(lambda _: lost.set())
        while not lost.is_set():
            getting = asyncio.ensure_future(self._outgoing.get())
            losing = asyncio.ensure_future(lost.wait())
            done: set[asyncio.Future[Any]] = set()
            try:
                done, _ = await asyncio.wait({getting, losing}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                losing.cancel()
                if getting not in done:
                    getting.cancel()
            if getting not in done:
                break
            batch = [getting.result()]
            while len(batch) < _BATCH and not self._outgoing.empty():
                batch.append(self._outgoing.get_nowait())
            payloads = [payload for payload in map(self._encode, batch) if payload is not None]
            if payloads:
                await connection.execute(_SEND, payloads)
        raise asyncpg.InterfaceError("connection closed")

    def _encode(self, update: Update) -> str | None:
        try:
            return encode(update, self.origin)
        except ValueError as exc:
            log.warning("%s; not relayed to other replicas", exc)
            return None

    def _heard(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        decoded = decode(payload)
        if decoded is None:
            log.warning("ignoring a live fan-out payload that is not vigil's")
            return
        origin, update = decoded
        if origin != self.origin:
            self._feed.deliver(update)
