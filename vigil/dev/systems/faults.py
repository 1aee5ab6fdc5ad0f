"""Faults a test can switch on in the demo systems: answers that come too late after the write committed, and
requests refused with a 503 before anything is done. Only an app created with a ``Faults`` has them; `vigil demo`
and ``python -m vigil.dev.systems`` never do."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vigil.core.clock import Clock


@dataclass
class Faults:
    """What the next requests suffer, set by a test between requests; ``requests`` records every request seen
    (``"POST /orders/ORD-10001/refunds"``, the path as sent, still percent-encoded).

    Attributes:
        delay_after_commit_s: how long a delayed request's answer is held after the request was handled (and its
            write committed), so that a client with a shorter timeout gives up on a write that was done.
        delay_count: how many of the next requests are delayed.
        unavailable_count: how many of the next requests are answered 503 without being handled.
    """

    delay_after_commit_s: float = 0.0
    delay_count: int = 0
    unavailable_count: int = 0
    requests: list[str] = field(default_factory=list)

    def take_delay(self) -> bool:
        """Whether this request is one to delay (counting it off)."""
        if self.delay_count <= 0:
            return False
        self.delay_count -= 1
        return True

    def take_unavailable(self) -> bool:
        """Whether this request is one to refuse with a 503 (counting it off)."""
        if self.unavailable_count <= 0:
            return False
        self.unavailable_count -= 1
        return True


class FaultInjection:
    """ASGI middleware applying ``Faults`` around the app."""

    def __init__(self, app: ASGIApp, *, faults: Faults, clock: Clock) -> None:
        self.app = app
        self.faults = faults
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path") or scope["path"].encode()
        self.faults.requests.append(f"{scope['method']} {raw_path.decode('latin-1')}")
        if self.faults.take_unavailable():
            await _unavailable(send)
            return
        if not self.faults.take_delay():
            await self.app(scope, receive, send)
            return
        delay = self.faults.delay_after_commit_s

        async def late(message: Message) -> None:
            # The handler returned (its transaction committed) before it starts the response.
            if message["type"] == "http.response.start":
                await self.clock.sleep(delay)
            await send(message)

        await self.app(scope, receive, late)


async def _unavailable(send: Send) -> None:
    body = b'{"detail": "the system is unavailable (an injected fault)"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
