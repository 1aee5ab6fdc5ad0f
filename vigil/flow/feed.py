"""The live feed: what the pipeline has just stored or published, pushed to whoever watches (the panel).

The pipeline calls ``publish`` after an event is committed or a suggestion is out; each subscriber holds a bounded
queue filtered by tenant (and, optionally, one conversation). A subscriber that falls too far behind is dropped
rather than allowed to hold memory: its stream ends and the browser reconnects and reloads. The feed carries
what this process handles; with several replicas each feeds the conversations of its own partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from vigil.flow.case import CaseState
from vigil.wire.events import Event, Feedback, Message, Suggestion

log = logging.getLogger(__name__)

UpdateKind = Literal["message", "case", "suggestion", "feedback"]


@dataclass(frozen=True)
class Update:
    """One thing that happened to a conversation, as the panel shows it (``data`` is JSON-ready)."""

    kind: UpdateKind
    tenant: str
    conversation_id: str
    data: dict[str, Any]

    @functools.cached_property
    def json(self) -> str:
        """``data`` as JSON, encoded once however many subscribers receive it."""
        return json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))


@dataclass(eq=False, slots=True)
class Subscriber:
    """One subscriber's filter and queue; iterate it for updates until the feed or the subscription ends."""

    tenants: tuple[str, ...] | None
    conversation_id: str | None
    queue: asyncio.Queue[Update | None]
    dropped: bool = False

    def wants(self, update: Update) -> bool:
        if self.tenants is not None and update.tenant not in self.tenants:
            return False
        return self.conversation_id is None or self.conversation_id == update.conversation_id

    def __aiter__(self) -> AsyncIterator[Update]:
        return self._updates()

    async def _updates(self) -> AsyncIterator[Update]:
        while True:
            update = await self.queue.get()
            if update is None:
                return
            yield update


@dataclass
class LiveFeed:
    """Fans updates out to subscribers; never blocks the pipeline."""

    max_queue: int = 1000
    relay: Callable[[Update], None] | None = None
    """Where this process's updates also go: the fan-out to other replicas, when there is one."""
    _subscribers: set[Subscriber] = field(default_factory=set)
    _closed: bool = False

    def publish(self, update: Update) -> None:
        """An update of this process: to its subscribers, and to the other replicas' (through ``relay``)."""
        self.deliver(update)
        if self.relay is not None:
            self.relay(update)

    def deliver(self, update: Update) -> None:
        """Hand ``update`` to every subscriber here that wants it."""
        for subscriber in list(self._subscribers):
            if not subscriber.wants(update):
                continue
            if subscriber.queue.qsize() >= self.max_queue - 1:
                self._drop(subscriber, "fell behind")
                continue
            subscriber.queue.put_nowait(update)

    @contextlib.contextmanager
    def watch(self, *, tenants: tuple[str, ...] | None, conversation_id: str | None = None) -> Iterator[Subscriber]:
        """A ``Subscriber`` for updates of ``tenants`` (None: all), optionally of one conversation only."""
        subscriber = Subscriber(tenants, conversation_id, asyncio.Queue(self.max_queue))
        if self._closed:
            subscriber.queue.put_nowait(None)
        else:
            self._subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            self._subscribers.discard(subscriber)

    @property
    def listening(self) -> bool:
        """Whether anyone would get an update now (a subscriber here, or the relay): if not, do not build one."""
        return bool(self._subscribers) or self.relay is not None

    @property
    def subscribers(self) -> int:
        """How many subscribers are connected."""
        return len(self._subscribers)

    def close(self) -> None:
        """End every subscriber's stream (shutdown), and refuse new ones."""
        self._closed = True
        for subscriber in list(self._subscribers):
            self._drop(subscriber, None)

    def _drop(self, subscriber: Subscriber, why: str | None) -> None:
        if why:
            log.info("dropping a live subscriber that %s; it will reconnect", why)
        subscriber.dropped = why is not None
        self._subscribers.discard(subscriber)
        with contextlib.suppress(asyncio.QueueFull):
            subscriber.queue.put_nowait(None)


def case_data(case: CaseState) -> dict[str, Any]:
    """A conversation's state as the panel's queue shows it."""
    waiting = case.waiting_since
    return {
        "conversation_id": case.conversation_id,
        "tenant": case.tenant,
        "status": case.status,
        "assignee": case.assignee,
        "priority": case.priority,
        "updated_at": case.updated_at.isoformat(),
        "message_count": case.message_count,
        "waiting_since": waiting.isoformat() if waiting else None,
    }


def recorded(event: Event, case: CaseState) -> Update:
    """The update for an event just committed to ``case``."""
    data: dict[str, Any] = {"case": case_data(case)}
    if isinstance(event, Message):
        data["message"] = {
            "message_id": event.message_id,
            "sent_at": event.sent_at.isoformat(),
            "role": event.role,
            "author": event.author,
            "text": event.text,
        }
    elif isinstance(event, Feedback):
        data["feedback"] = event.model_dump(mode="json", include={"suggestion_id", "verdict", "by", "at", "text"})
    kind: UpdateKind = "message" if isinstance(event, Message) else event.type
    return Update(kind, case.tenant, case.conversation_id, data)


def suggested(suggestion: Suggestion) -> Update:
    """The update for a suggestion just published."""
    data = {"suggestion": suggestion.model_dump(mode="json", exclude={"type", "schema_version"})}
    return Update("suggestion", suggestion.tenant, suggestion.conversation_id, data)


class FeedWatcher:
    """Watches the pipeline for the feed: what it records and publishes becomes an update, if anyone listens."""

    def __init__(self, feed: LiveFeed) -> None:
        self._feed = feed

    def recorded(self, event: Event, case: CaseState) -> None:
        if self._feed.listening:
            self._feed.publish(recorded(event, case))

    def suggested(self, suggestion: Suggestion) -> None:
        if self._feed.listening:
            self._feed.publish(suggested(suggestion))
