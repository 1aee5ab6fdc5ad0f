"""The end-to-end harness: `vigil` as a subprocess, the database it writes, and v1 events to feed it.

Everything here looks at vigil from the outside, as an operator would: its exit code and stderr, its HTTP port,
its metrics, the rows in its database and the records on its topics.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Topics, wait_for
from vigil.dev.broker import free_port

VIGIL = Path(sys.executable).parent / "vigil"
EPOCH = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

# What every test's vigil gets unless it says otherwise: fast group joins and health checks, its own data dir.
BASE_ENV = {
    "VIGIL_KAFKA__SESSION_TIMEOUT_S": "6",
    "VIGIL_KAFKA__PARTITIONS": "3",
    "VIGIL_HEALTH_INTERVAL_S": "0.2",
    "VIGIL_GRACEFUL_TIMEOUT_S": "10",
    "VIGIL_HTTP__HOST": "127.0.0.1",
    "VIGIL_LOG_LEVEL": "INFO",
    # These tests are about ingest; the answer skill (and its model) has tests of its own.
    "VIGIL_ANSWERS__ENABLED": "false",
}


class VigilExited(AssertionError):
    """The vigil process ended while a test was waiting for it to do something."""


@dataclass
class VigilProcess:
    """One running `vigil` command, its HTTP port and its log (stdout and stderr together)."""

    args: tuple[str, ...]
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def check_alive(self) -> None:
        code = self.popen.poll()
        if code is not None:
            raise VigilExited(f"vigil {' '.join(self.args)} exited with {code}; log tail:\n{self.tail()}")

    def get(self, path: str, timeout_s: float = 3.0) -> httpx.Response:
        return httpx.get(self.base_url + path, timeout=timeout_s)

    def status(self, path: str) -> int | None:
        """The HTTP status of ``GET path``, or None while nothing answers on the port."""
        try:
            return self.get(path).status_code
        except httpx.TransportError:
            return None

    def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        response = self.get(f"/api/conversations/{conversation_id}")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return dict(response.json())

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample on /metrics, keyed by (sample name, sorted labels)."""
        response = self.get("/metrics")
        response.raise_for_status()
        samples = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
        return samples

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value (0 when the labelled child was never touched)."""
        return self.metrics().get((name, tuple(sorted(labels.items()))), 0.0)

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout_s: float) -> int:
        """Wait for the process to exit; fail (with the log) if it does not."""
        try:
            return self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"vigil did not exit within {timeout_s}s; log tail:\n{self.tail()}") from None

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 15.0, *, clean: bool = True) -> float:
        """Signal the process, wait for it to exit with 0, and return how long that took.

        With ``clean``, the log must hold no traceback: nothing failed on the way (a failed close, a lost task).
        """
        started = time.monotonic()
        self.send(sig)
        code = self.wait(timeout_s)
        took = time.monotonic() - started
        assert code == 0, f"vigil exited with {code} after {sig.name}; log tail:\n{self.tail()}"
        assert not clean or "Traceback" not in self.log(), "a traceback in vigil's log"
        return took


@dataclass(frozen=True)
class Finished:
    """A `vigil` command that ran to its end."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class VigilCli:
    """Starts `vigil` commands for one test; each logs to a file in the test's directory; leftovers are killed."""

    tmp_path: Path
    processes: list[VigilProcess] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def env(self, **settings: str) -> dict[str, str]:
        """The environment: this machine's, minus any VIGIL_ setting of the developer's, plus the test's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIGIL_")}
        env |= BASE_ENV | {"VIGIL_DATA_DIR": str(self.tmp_path / "data")}
        env |= settings
        return {k: v for k, v in env.items() if v is not None}

    def _log_path(self, args: Iterable[str]) -> Path:
        name = "-".join(a.replace("/", "_") for a in args)[:40]
        path = self.tmp_path / f"vigil-{len(self.logs) + 1}-{name}.log"
        self.logs.append(path)
        return path

    def start(self, *args: str, **settings: str) -> VigilProcess:
        """Start a long-running command (`run`, `demo`) on a free HTTP port."""
        port = int(settings.pop("VIGIL_HTTP__PORT", None) or free_port())
        env = self.env(VIGIL_HTTP__PORT=str(port), **settings)
        log_path = self._log_path(args)
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                [str(VIGIL), *args],
                cwd=self.tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        process = VigilProcess(tuple(args), popen, log_path, port)
        self.processes.append(process)
        return process

    def daemon(self, bootstrap: str, topics: Topics, db_url: str, **settings: str) -> VigilProcess:
        """`vigil run` against a broker, the test's topics and group, and a database."""
        return self.start(
            "run",
            VIGIL_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
            VIGIL_KAFKA__INPUT_TOPIC=topics.input,
            VIGIL_KAFKA__SUGGESTIONS_TOPIC=topics.suggestions,
            VIGIL_KAFKA__DLQ_TOPIC=topics.dlq,
            VIGIL_KAFKA__GROUP_ID=topics.group,
            VIGIL_DATABASE__URL=db_url,
            **settings,
        )

    def call(self, *args: str, timeout_s: float = 60.0, **settings: str) -> Finished:
        """Run a command to its end (`db upgrade`, `replay`, a start-up that must fail) and capture its output."""
        log_path = self._log_path(args)
        result = subprocess.run(
            [str(VIGIL), *args],
            cwd=self.tmp_path,
            env=self.env(**settings),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
        stdout, stderr = result.stdout.decode("utf-8", "replace"), result.stderr.decode("utf-8", "replace")
        log_path.write_text(
            f"$ vigil {' '.join(args)}\nexit {result.returncode}\n--- stdout\n{stdout}--- stderr\n{stderr}"
        )
        return Finished(result.returncode, stdout, stderr)

    def kill_all(self) -> None:
        """Stop whatever is still running, and the processes it started (the demo's broker)."""
        for process in self.processes:
            if process.popen.poll() is not None:
                continue
            children = child_pids(process.pid)
            process.popen.send_signal(signal.SIGTERM)
            try:
                process.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
            for pid in children:
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


async def eventually(
    what: str,
    predicate: Callable[[], object],
    timeout_s: float = 20.0,
    process: VigilProcess | None = None,
    show: Callable[[], object] | None = None,
) -> Any:
    """Poll ``predicate`` until it is truthy; fail naming ``what`` (and ``show()``), or at once if ``process`` died."""

    def probe() -> object:
        if process is not None:
            process.check_alive()
        return predicate()

    try:
        return await wait_for(probe, timeout_s)
    except VigilExited:
        raise
    except AssertionError:
        seen = f" (now: {show()!r})" if show is not None else ""
        raise AssertionError(f"{what}: not within {timeout_s}s{seen}") from None


async def ready(process: VigilProcess, timeout_s: float = 20.0) -> None:
    """Wait until /readyz says 200."""
    await eventually("/readyz 200", lambda: process.status("/readyz") == 200, timeout_s, process)


class Database:
    """The database a vigil writes to, read directly (sqlite3 or psycopg) by the test."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.path = Path(url.split(":///", 1)[1])
        else:
            self.dsn = "postgresql://" + url.split("://", 1)[1]

    def query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``?`` placeholders); empty while the database or the table does not exist yet."""
        if self.is_sqlite:
            if not self.path.exists():
                return []
            with contextlib.closing(sqlite3.connect(self.path, timeout=10)) as lite:
                try:
                    return lite.execute(sql, params).fetchall()
                except sqlite3.OperationalError as exc:
                    if "no such table" in str(exc):
                        return []
                    raise
        with psycopg.connect(self.dsn) as pg:
            try:
                return pg.execute(sql.replace("?", "%s").encode(), params).fetchall()
            except psycopg.errors.UndefinedTable:
                return []

    def execute(self, sql: str, *params: object) -> None:
        """Run one statement and commit it."""
        if self.is_sqlite:
            with contextlib.closing(sqlite3.connect(self.path, timeout=10)) as lite, lite:
                lite.execute(sql, params)
            return
        with psycopg.connect(self.dsn) as pg:
            pg.execute(sql.replace("?", "%s").encode(), params)

    def scalar(self, sql: str, *params: object) -> Any:
        rows = self.query(sql, *params)
        return rows[0][0] if rows else None

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}") or 0)

    async def reach(
        self, table: str, rows: int, process: VigilProcess, *, timeout_s: float = 30.0, at_least: bool = False
    ) -> None:
        """Wait until ``table`` holds ``rows`` rows (or more, with ``at_least``) while ``process`` runs."""

        def reached() -> bool:
            count = self.count(table)
            return count >= rows if at_least else count == rows

        what = f"{'at least ' if at_least else ''}{rows} rows in {table}"
        await eventually(what, reached, timeout_s, process, show=lambda: self.count(table))

    def tables(self) -> set[str]:
        if self.is_sqlite:
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = self.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
        return {name for (name,) in rows}

    def message_ids(self, conversation_id: str) -> list[str]:
        """A conversation's stored message ids in stream order."""
        rows = self.query("SELECT message_id FROM message WHERE conversation_id = ? ORDER BY seq", conversation_id)
        return [message_id for (message_id,) in rows]

    def assert_stored_once(self, conversations: dict[str, list[str]]) -> None:
        """Every message stored exactly once, in each conversation's order, and counted once on its case."""
        total = sum(len(ids) for ids in conversations.values())
        assert self.count("message") == total
        assert self.scalar("SELECT count(DISTINCT message_id) FROM message") == total
        counted = dict(self.query("SELECT id, message_count FROM conversation"))
        for conversation_id, ids in conversations.items():
            assert self.message_ids(conversation_id) == ids, f"{conversation_id}: wrong messages or order"
            assert counted.get(conversation_id) == len(ids), (
                f"{conversation_id}: message_count {counted.get(conversation_id)}"
            )


# v1 events, as a chat platform would send them.


def at(seconds: float) -> str:
    """An RFC 3339 UTC time ``seconds`` after the test epoch."""
    return (EPOCH + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def message(
    conversation_id: str,
    message_id: str,
    text: str = "hello",
    *,
    role: str = "customer",
    sent_at: str | None = None,
    **fields: object,
) -> dict[str, Any]:
    return {
        "type": "message",
        "schema_version": 1,
        "message_id": message_id,
        "conversation_id": conversation_id,
        "sent_at": sent_at or at(0),
        "role": role,
        "text": text,
        **fields,
    }


def case(
    conversation_id: str, event_id: str, event: str, *, when: str | None = None, **fields: object
) -> dict[str, Any]:
    return {
        "type": "case",
        "schema_version": 1,
        "event_id": event_id,
        "conversation_id": conversation_id,
        "at": when or at(0),
        "event": event,
        **fields,
    }


def feedback(
    conversation_id: str, feedback_id: str, suggestion_id: str, verdict: str = "accepted", **fields: object
) -> dict[str, Any]:
    return {
        "type": "feedback",
        "schema_version": 1,
        "feedback_id": feedback_id,
        "suggestion_id": suggestion_id,
        "conversation_id": conversation_id,
        "verdict": verdict,
        "at": at(0),
        **fields,
    }


Records = list[tuple[bytes | None, bytes | None]]
"""(key, value) pairs, as ``tests.kafka_client.produce`` takes them."""


def record(event: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
    """The Kafka record for an event: keyed by its conversation id, JSON value."""
    return event["conversation_id"].encode(), json.dumps(event, ensure_ascii=False).encode()


def chat(conversations: int, messages: int, prefix: str) -> tuple[Records, dict[str, list[str]]]:
    """``messages`` messages spread round-robin over ``conversations`` conversations, as records in stream order,
    and each conversation's message ids in that order."""
    records: Records = []
    expected: dict[str, list[str]] = {f"{prefix}-c{n:02d}": [] for n in range(conversations)}
    names = list(expected)
    for n in range(messages):
        conversation_id = names[n % conversations]
        message_id = f"{conversation_id}-m{len(expected[conversation_id]):04d}"
        expected[conversation_id].append(message_id)
        role = "customer" if n % 2 else "analyst"
        records.append(record(message(conversation_id, message_id, f"message {n}", role=role, sent_at=at(n))))
    return records, expected
