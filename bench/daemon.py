"""vigil under test: ``vigil run`` in a process of its own, configured by environment variables as in production.

A process of its own keeps its memory its own (peak RSS is read from ``/proc``) and lets the scheduler give it a
core, as a deployment would. The benchmark watches it only through ``/metrics``, ``/proc`` and its database.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from bench import metrics
from bench.linux import cpu_seconds, peak_rss_bytes
from vigil.dev.broker import free_port


def vigil_command(*args: str) -> list[str]:
    """The ``vigil`` console script next to this interpreter (or on the PATH), with ``args`` (default ``run``)."""
    beside = Path(sys.executable).parent / "vigil"
    found = str(beside) if beside.is_file() else shutil.which("vigil")
    if found is None:
        raise FileNotFoundError("no vigil executable; pip install -e . first")
    return [found, *(args or ("run",))]


class VigilProcess:
    """One ``vigil run`` reading ``topic`` from ``bootstrap`` into ``db_url``, with a fresh consumer group."""

    def __init__(
        self,
        *,
        bootstrap: str,
        topic: str,
        db_url: str,
        workdir: Path,
        partitions: int,
        settings: Mapping[str, str] | None = None,
        command: tuple[str, ...] = ("run",),
    ) -> None:
        """``settings`` are more of vigil's settings, named as environment variables without ``VIGIL_``;
        ``command`` is the vigil command to run (``("demo", "--no-traffic")``)."""
        self._command = command
        self.port = free_port()
        self._workdir = workdir
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")} | {
            "VIGIL_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
            "VIGIL_KAFKA__INPUT_TOPIC": topic,
            "VIGIL_KAFKA__SUGGESTIONS_TOPIC": f"{topic}.suggestions",
            "VIGIL_KAFKA__DLQ_TOPIC": f"{topic}.dlq",
            "VIGIL_KAFKA__GROUP_ID": f"vigil-{topic}",
            "VIGIL_KAFKA__PARTITIONS": str(partitions),
            "VIGIL_KAFKA__SESSION_TIMEOUT_S": "6",
            "VIGIL_DATABASE__URL": db_url,
            "VIGIL_DATA_DIR": str(workdir / "data"),
            "VIGIL_HTTP__PORT": str(self.port),
        }
        self._env |= {f"VIGIL_{name.upper()}": value for name, value in (settings or {}).items()}
        self._process: asyncio.subprocess.Process | None = None
        self._http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=5.0)

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("vigil is not running")
        return self._process.pid

    async def start(self, timeout_s: float = 30.0) -> None:
        """Start vigil and wait until its HTTP port answers (it joins the consumer group after that)."""
        self._workdir.mkdir(parents=True, exist_ok=True)
        with (self._workdir / "vigil.log").open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                *vigil_command(*self._command),
                cwd=self._workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        async with asyncio.timeout(timeout_s):
            while True:
                self._check_alive()
                try:
                    await self._http.get("/healthz")
                    return
                except httpx.TransportError:
                    await asyncio.sleep(0.05)

    async def snapshot(self) -> metrics.Snapshot:
        """vigil's counters now."""
        return metrics.parse(await self.metrics_text())

    async def metrics_text(self) -> str:
        """vigil's ``/metrics`` as it exposes them."""
        self._check_alive()
        response = await self._http.get("/metrics")
        response.raise_for_status()
        return response.text

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def peak_rss_bytes(self) -> int:
        return peak_rss_bytes(self.pid)

    def send(self, sig: signal.Signals) -> None:
        """Signal vigil (and leave it running)."""
        if self._process is not None and self._process.returncode is None:
            self._process.send_signal(sig)

    def log(self) -> str:
        """What vigil has logged so far."""
        return (self._workdir / "vigil.log").read_text(errors="replace")

    async def stop(self, timeout_s: float = 30.0, sig: signal.Signals = signal.SIGTERM) -> int:
        """``sig`` (SIGTERM, as an orchestrator would); returns the exit code (killed if it does not exit in time)."""
        await self._http.aclose()
        if self._process is None:
            return 0
        process, self._process = self._process, None
        if process.returncode is None:
            process.send_signal(sig)
        try:
            async with asyncio.timeout(timeout_s):
                return await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise

    def profile(self, output: Path, rate: int = 100) -> subprocess.Popen[bytes]:
        """Sample vigil with py-spy ``rate`` times a second until it exits (or py-spy gets SIGINT), writing
        collapsed stacks to ``output`` (flamegraph input)."""
        beside = Path(sys.executable).parent / "py-spy"
        found = str(beside) if beside.is_file() else shutil.which("py-spy")
        if found is None:
            raise FileNotFoundError("--profile needs py-spy: pip install py-spy")
        command = [found, "record", "--pid", str(self.pid), "--rate", str(rate), "--nonblocking", "--format", "raw"]
        return subprocess.Popen(
            [*command, "--output", str(output)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _check_alive(self) -> None:
        if self._process is not None and self._process.returncode is not None:
            log = (self._workdir / "vigil.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"vigil exited with code {self._process.returncode}:\n{log}")
