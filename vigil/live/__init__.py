"""Live updates: what the pipeline stores and publishes, pushed to the panels watching, across replicas."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform, Step

if TYPE_CHECKING:
    from vigil.flow.feed import LiveFeed


def setup(platform: Platform, *, feed: LiveFeed, fanout_url: str | None) -> Capability:
    """The feed watches the pipeline; with ``fanout_url`` (PostgreSQL) updates also reach the other replicas."""
    from vigil.flow.feed import FeedWatcher
    from vigil.live.fanout import Fanout

    closing = []
    starting = []
    if fanout_url is not None:
        fanout = Fanout(fanout_url, feed, backoff=platform.backoff)
        feed.relay = fanout.send

        async def start() -> None:
            fanout.start()

        starting.append(Step("starting the live fan-out", start))
        closing.append(fanout.close)

    async def close_feed() -> None:
        feed.close()

    return Capability(name="live", watchers=[FeedWatcher(feed)], starting=starting, closing=[close_feed, *closing])
