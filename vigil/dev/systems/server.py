"""The demo systems served by uvicorn inside the caller's asyncio loop, on a loopback port: `vigil demo` and the
tests start it next to vigil, so that approved actions change something real."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import uvicorn

from vigil.core.clock import Clock, SystemClock
from vigil.core.errors import StartupError
from vigil.dev.systems.app import create_app
from vigil.dev.systems.faults import Faults

_START_S = 10.0
_STOP_S = 5.0


class _Embedded(uvicorn.Server):
    """uvicorn in someone else's loop: the owner of the process handles the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class SystemsServer:
    """The order system, billing and CRM on ``http://127.0.0.1:<port>``; ``async with SystemsServer(path) as s``.

    Args:
        path: the SQLite file (its tables are created if missing; ``seed.ensure_seeded`` fills it).
        port: 0 takes a free port; ``url`` says which once started.
        token: when set, every request needs ``Authorization: Bearer <token>``.
        faults: faults for tests (``vigil.dev.systems.faults``).
    """

    def __init__(
        self,
        path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        faults: Faults | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.app = create_app(path, token=token, faults=faults, clock=clock or SystemClock())
        self.host = host
        self.port = port
        self._server: _Embedded | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>`` (the port is known once started)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Listen and serve; raises ``StartupError`` if the port cannot be taken or the server does not start."""
        listener = _listen(self.host, self.port)
        self.port = int(listener.getsockname()[1])
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off")
        self._server = server = _Embedded(config)
        self._task = serving = asyncio.create_task(server.serve(sockets=[listener]), name="vigil-demo-systems")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _START_S
        while not server.started:
            if serving.done() or loop.time() > deadline:
                serving.cancel()
                listener.close()
                raise StartupError(f"the demo systems did not start on {self.url}")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop taking requests and let those in flight finish (within a few seconds)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), _STOP_S)
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = self._task = None

    async def __aenter__(self) -> SystemsServer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _listen(host: str, port: int) -> socket.socket:
    """Bind the port ourselves: uvicorn would call sys.exit on a failure."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # asyncio turns Nagle off only on sockets whose proto is IPPROTO_TCP, which a socket made with the default
        # proto is not; without it a response written in two parts waits for the client's delayed ACK (a read
        # measured 49 ms -> 2 ms). Accepted sockets inherit the option.
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise StartupError(f"the demo systems cannot listen on {host}:{port}: {exc}") from exc
    listener.setblocking(False)
    return listener
