"""The live feed: each watcher gets what its tenants and conversation allow, a slow one is dropped, close ends all."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from vigil.flow.case import CaseState
from vigil.flow.feed import LiveFeed, Subscriber, Update, recorded
from vigil.wire.events import Feedback, Message

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def update(tenant: str = "acme", conversation: str = "c-1", n: int = 0) -> Update:
    return Update("message", tenant, conversation, {"n": n})


def drained(watcher: Subscriber) -> list[Update | None]:
    got = []
    while not watcher.queue.empty():
        got.append(watcher.queue.get_nowait())
    return got


def test_a_watcher_gets_only_its_tenants_and_conversation():
    feed = LiveFeed()
    with (
        feed.watch(tenants=("acme",)) as acme,
        feed.watch(tenants=None) as everyone,
        feed.watch(tenants=("acme",), conversation_id="c-2") as one,
    ):
        for u in (update("acme", "c-1"), update("globex", "c-1"), update("acme", "c-2")):
            feed.publish(u)
        assert [(u.tenant, u.conversation_id) for u in drained(acme) if u] == [("acme", "c-1"), ("acme", "c-2")]
        assert len(drained(everyone)) == 3
        assert [(u.tenant, u.conversation_id) for u in drained(one) if u] == [("acme", "c-2")]
    assert feed.subscribers == 0


def test_a_watcher_that_falls_behind_is_dropped_and_its_stream_ends():
    feed = LiveFeed(max_queue=5)
    with feed.watch(tenants=None) as slow, feed.watch(tenants=None) as quick:
        for n in range(10):
            feed.publish(update(n=n))
            drained(quick)
        got = drained(slow)
        assert got[-1] is None and slow.dropped and len(got) <= 5
        assert feed.subscribers == 1  # the quick one stays


async def test_close_ends_every_stream_and_refuses_new_watchers():
    feed = LiveFeed()
    with feed.watch(tenants=None) as watcher:
        reading = asyncio.create_task(anext(aiter(watcher), "ended"))
        feed.publish(update())
        assert (await reading).data == {"n": 0}
        feed.close()
        assert await anext(aiter(watcher), "ended") == "ended"
    with feed.watch(tenants=None) as late:
        assert await anext(aiter(late), "ended") == "ended"


def test_publish_relays_and_deliver_does_not():
    relayed: list[Update] = []
    feed = LiveFeed(relay=relayed.append)
    with feed.watch(tenants=None) as watcher:
        feed.publish(update(n=1))
        feed.deliver(update(n=2))
        assert [u.data["n"] for u in drained(watcher) if u] == [1, 2]
    assert [u.data["n"] for u in relayed] == [1]


def test_updates_carry_what_the_queue_and_the_conversation_show():
    case = CaseState("c-1", "acme", "open", "tom", None, NOW, NOW, None, 3, last_customer_at=NOW)
    message = Message(
        type="message",
        schema_version=1,
        message_id="m-1",
        conversation_id="c-1",
        sent_at=NOW,
        role="customer",
        text="<b>hi</b>",
    )
    u = recorded(message, case)
    assert (u.kind, u.tenant) == ("message", "acme")
    assert u.data["message"]["text"] == "<b>hi</b>" and u.data["case"]["waiting_since"] == NOW.isoformat()
    verdict = Feedback(
        type="feedback",
        schema_version=1,
        feedback_id="f-1",
        suggestion_id="s-1",
        conversation_id="c-1",
        verdict="dismissed",
        by="ana",
        at=NOW,
        text="wrong plan",
    )
    f = recorded(verdict, case)
    assert f.kind == "feedback" and f.data["feedback"] == {
        "suggestion_id": "s-1",
        "verdict": "dismissed",
        "by": "ana",
        "at": "2026-11-30T09:00:00Z",
        "text": "wrong plan",
    }


def test_the_feed_says_whether_anyone_listens():
    feed = LiveFeed()
    assert not feed.listening
    with feed.watch(tenants=None):
        assert feed.listening
    assert not feed.listening
    assert LiveFeed(relay=lambda _: None).listening
