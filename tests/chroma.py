"""A Chroma server of a test's own (``chroma run``), which the test may stop and start again."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from vigil.dev.broker import free_port

CHROMA = Path("/work/main/.venv/bin/chroma")


class ChromaServer:
    """A real ``chroma run`` on a free port with its data under a folder; it can be stopped and started again on the
    same port and data, as an operator restarting it would."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = (folder / "chroma-server.log").open("a")

    def start(self) -> None:
        executable = CHROMA if CHROMA.exists() else Path(sys.executable).parent / "chroma"
        command = [str(executable), "run", "--path", str(self.folder / "chroma-server")]
        self._process = server = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(self.port)], stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"chroma run exited: {(self.folder / 'chroma-server.log').read_text()}"
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the Chroma server did not answer its heartbeat within 60 s"
            time.sleep(0.1)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def close(self) -> None:
        self.stop()
        self._log.close()
