"""How `vigil replay` and `vigil send` find a running `vigil demo`: a small JSON file in the data dir.

The demo writes ``demo.json`` (its broker and topics) once it is ready and removes it when it exits; a file left by
a demo that was killed names a process that is gone, and counts as absent.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

DEMO_FILE = "demo.json"


@dataclass(frozen=True, slots=True)
class DemoAddress:
    """Where a running demo takes events, and the process that runs it."""

    bootstrap_servers: str
    input_topic: str
    suggestions_topic: str
    dlq_topic: str
    panel_url: str
    pid: int
    tenant: str | None = None
    """The tenant the demo's conversations are of: what `vigil send` writes as unless told otherwise."""


def demo_file(data_dir: Path) -> Path:
    """The discovery file of the demo that uses ``data_dir``."""
    return data_dir / DEMO_FILE


def publish(data_dir: Path, address: DemoAddress) -> Path:
    """Write ``address`` where a reader never sees half a file (write aside, then rename)."""
    path = demo_file(data_dir)
    aside = path.with_name(f".{DEMO_FILE}.{address.pid}")
    aside.write_text(json.dumps(asdict(address), indent=2) + "\n", "utf-8")
    aside.replace(path)
    return path


def withdraw(data_dir: Path, pid: int) -> None:
    """Remove the file if the process ``pid`` wrote it (a newer demo on the same data dir keeps its own)."""
    found = find(data_dir)
    if found is not None and found.pid == pid:
        demo_file(data_dir).unlink(missing_ok=True)


def find(data_dir: Path) -> DemoAddress | None:
    """The running demo's address, or None: no file, a file that is not ours to read, or its process is gone."""
    try:
        raw = json.loads(demo_file(data_dir).read_text("utf-8"))
        address = DemoAddress(**raw)
    except (OSError, ValueError, TypeError):
        return None
    return address if _alive(address.pid) else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    with contextlib.suppress(PermissionError):  # someone else's process: it exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
    return True
