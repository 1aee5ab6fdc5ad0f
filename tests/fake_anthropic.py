"""A real local HTTP server that speaks Anthropic's Messages API wire format, for the LLM paths' tests.

    async with FakeAnthropic.serving() as fake:        # or the ``fake_llm`` fixture (tests/conftest.py)
        fake.handler = message("Scan the QR code [esim-setup].")   # or tool_use({...}), error(503, ...), raw(...)
        ...                                            # point LlmSettings(base_url=fake.url) at it
        fake.requests[0]["messages"]                   # the JSON bodies it received, in order

Each handler answers as the API does: ``message`` a text reply, ``tool_use`` a forced tool call, ``error`` an error
body with a status, ``raw`` any body at all (for malformed replies). A handler that must hang waits on ``release``,
which is set when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

KEY = "sk-test-123"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class FakeAnthropic:
    """A Messages API server on 127.0.0.1; each test sets ``handler`` and reads ``requests``."""

    url: str = ""
    handler: Handler | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(cls) -> AsyncIterator[FakeAnthropic]:
        """A server on a free port, stopped (and its hanging handlers released) on exit."""
        fake = cls()
        app = web.Application()
        app.router.add_post("/v1/messages", fake.messages)
        runner = web.AppRunner(app, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        fake.url = f"http://127.0.0.1:{port}"
        try:
            yield fake
        finally:
            fake.release.set()
            await runner.cleanup()

    def reset(self) -> None:
        """No handler, nothing received: as a new test finds it."""
        self.handler = None
        self.requests.clear()
        self.headers.clear()

    async def messages(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        self.requests.append(await request.json())
        assert self.handler is not None
        return await self.handler(request)


def reply(
    content: list[dict[str, Any]], *, stop_reason: str, input_tokens: int = 1200, output_tokens: int = 80
) -> Handler:
    """A Messages API reply with these content blocks."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            }
        )

    return handle


def message(text: str, *, stop_reason: str = "end_turn", input_tokens: int = 1200, output_tokens: int = 80) -> Handler:
    """A text reply."""
    return reply(
        [{"type": "text", "text": text}],
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def tool_use(name: str, arguments: Any, *, stop_reason: str = "tool_use", output_tokens: int = 80) -> Handler:
    """A reply that calls tool ``name`` with ``arguments`` as its input (what a forced ``tool_choice`` gives)."""
    block = {"type": "tool_use", "id": "toolu_01", "name": name, "input": arguments}
    return reply([block], stop_reason=stop_reason, output_tokens=output_tokens)


def error(status: int, kind: str, headers: dict[str, str] | None = None) -> Handler:
    """An error reply, as the API sends one."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = {"type": "error", "error": {"type": kind, "message": "nope"}}
        return web.json_response(body, status=status, headers=headers)

    return handle


def raw(body: str, content_type: str = "application/json") -> Handler:
    """Any body at all."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body.encode(), content_type=content_type)

    return handle


def hanging(fake: FakeAnthropic, answered: list[bool], then: Handler) -> Handler:
    """A handler that waits (up to 5 s, or until the server stops) before answering with ``then``; it appends to
    ``answered`` if it ever answers, so a test can tell its client gave up first."""

    async def slow(request: web.Request) -> web.StreamResponse:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(fake.release.wait(), timeout=5)
        answered.append(True)
        return await then(request)

    return slow


def prompt_of(body: dict[str, Any]) -> str:
    """The text of a request's one user turn (a string, or its first text block)."""
    (turn,) = body["messages"]
    content = turn["content"]
    return content if isinstance(content, str) else str(content[0]["text"])
