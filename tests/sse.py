"""Server-sent events read off an httpx streaming response, for the tests and the panel benchmark."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """Each event's name and data (its data lines joined by newlines), as the blank line that ends it arrives."""
    kind, data = "message", []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield kind, "\n".join(data)
            kind, data = "message", []
        elif line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").removeprefix(" "))
