"""A Mosquitto broker of a test's own, and the ``mosquitto_pub``/``mosquitto_sub`` clients as independent peers."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from pathlib import Path

from vigil.broker import free_port

CONF = """\
listener {port} 127.0.0.1
allow_anonymous true
persistence true
persistence_location {data}/
user root
log_dest file {data}/mosquitto.log
log_type error
log_type warning
log_type notice
"""


class Mosquitto:
    """``mosquitto -c CONF`` on a free loopback port with persistence in ``data_dir``; restartable on both."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.host = "127.0.0.1"
        self._process: subprocess.Popen[bytes] | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        self._conf = data_dir / "mosquitto.conf"
        self._conf.write_text(CONF.format(port=self.port, data=data_dir))

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the broker and wait until its port accepts connections."""
        self._process = subprocess.Popen(
            ["mosquitto", "-c", str(self._conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self._process.returncode}; see {self.data_dir}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def stop(self) -> None:
        """Stop it as a service manager would (SIGTERM): it saves its sessions and queued messages to disk."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


async def mosquitto_pub(broker: Mosquitto, topic: str, payload: bytes, *options: str, timeout_s: float = 10.0) -> int:
    """Publish one message with ``mosquitto_pub -V 5 -q 1``; its exit code (0: the broker acknowledged it)."""
    process = await asyncio.create_subprocess_exec(
        "mosquitto_pub",
        *("-h", broker.host, "-p", str(broker.port), "-V", "5", "-q", "1", "-t", topic, "-s", *options),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(timeout_s):
            await process.communicate(payload)
    except TimeoutError:
        process.kill()
        await process.wait()
    assert process.returncode is not None
    return process.returncode


async def mosquitto_pub_lines(broker: Mosquitto, topic: str, lines: list[str], qos: int) -> int:
    """Publish each line as one message, as fast as one client can (``mosquitto_pub -l``); its exit code."""
    process = await asyncio.create_subprocess_exec(
        "mosquitto_pub",
        *("-h", broker.host, "-p", str(broker.port), "-V", "5", "-q", str(qos), "-t", topic, "-l"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with asyncio.timeout(30):
        await process.communicate("".join(f"{line}\n" for line in lines).encode())
    assert process.returncode is not None
    return process.returncode


class MosquittoSub:
    """A persistent ``mosquitto_sub`` session: ``subscribe()`` creates it, ``read(n)`` collects what it queued."""

    def __init__(self, broker: Mosquitto, topic: str, client_id: str) -> None:
        self._broker = broker
        self._args = ["-h", broker.host, "-p", str(broker.port), "-V", "5", "-q", "1", "-c", "-i", client_id]
        self._args += ["-t", topic]

    async def subscribe(self) -> None:
        """Create the session and its subscription, and return once the broker has acknowledged it."""
        await self._run("-E")

    async def read(self, count: int, fmt: str = "%t|%P|%p", timeout_s: float = 10.0) -> list[str]:
        """The next ``count`` messages, formatted with ``-F fmt`` (``%P`` prints user properties as key:value)."""
        out = await self._run("-C", str(count), "-W", str(int(timeout_s)), "-F", fmt)
        return out.decode().splitlines()

    async def _run(self, *options: str) -> bytes:
        process = await asyncio.create_subprocess_exec(
            "mosquitto_sub",
            *self._args,
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return out
