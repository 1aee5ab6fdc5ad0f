"""Killing vigil for real, Jepsen's way: the demo systems in a process of their own (they keep the money that moved
while vigil was dead), one broker kept across vigil's lives (it redelivers what vigil had not committed and keeps
what it had published), and vigil started armed with a failpoint (``VIGIL_FAULTS``, vigil/core/faults.py), seen to
die of SIGKILL there, then restarted without it. What the systems hold is then reconciled against what vigil says
(tests/e2e/reconcile.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import Topics
from tests.e2e.action_chat import PARTITIONS, Chat, Daemon
from tests.e2e.harness import Database, VigilCli, VigilProcess, eventually, ready
from tests.e2e.reconcile import Sent, stuck_actions
from tests.e2e.shop import Order, ShopFile, stamp
from tests.kafka_client import AckedProducer, Read
from vigil.core.clock import SystemClock
from vigil.dev.broker import free_port
from vigil.dev.systems.seed import seed

RECONCILER = {"VIGIL_ACTIONS__RECONCILE_INTERVAL_S": "1", "VIGIL_ACTIONS__CLAIM_TIMEOUT_S": "2"}
"""A reconciler that takes over a lapsed claim within seconds (branch ``actions`` adds these settings)."""
SETTLE_S = 30.0
"""How long after the restart every action must have left ``approved`` and ``executing``: the reconciler's
interval and claim timeout, a group rejoin and a busy machine's slack."""
START_S = 120.0
DEATH_S = 60.0


class SystemsProcess(ShopFile):
    """The demo's order system, billing and CRM (``python -m vigil.dev.systems``) in a process of their own: they
    answer whatever happens to vigil, and ``paused()`` (SIGSTOP) makes vigil's calls to them time out."""

    def __init__(self, db: Path, log: Path) -> None:
        super().__init__(db)
        self.log = log
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> SystemsProcess:
        """Seed the file (once) and serve it on a free port; return when it answers."""
        if not self.db.exists():
            seed(self.db, now=SystemClock().now())
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with self.log.open("ab") as log:
            self._popen = subprocess.Popen(
                [sys.executable, "-m", "vigil.dev.systems", "--db", str(self.db), "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout_s
        while not self.answers():
            if self._popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the demo systems did not start; see {self.log}")
            time.sleep(0.05)
        return self

    @property
    def pid(self) -> int:
        assert self._popen is not None, "not started"
        return self._popen.pid

    def answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/customers/CUS-1001", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self._popen is None or self._popen.poll() is not None:
            return
        os.kill(self._popen.pid, signal.SIGCONT)  # a paused server cannot take its SIGTERM
        self._popen.terminate()
        try:
            self._popen.wait(10)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stopped (SIGSTOP) and resumed on exit: calls hang until vigil's connector times out."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)


class Lives:
    """One vigil's successive lives on the same database, topics, broker and systems: each ``start`` is a new
    ``vigil run`` (armed with ``faults`` or not) taking over the consumer group and the database of the last."""

    def __init__(
        self,
        cli: VigilCli,
        *,
        bootstrap: str,
        topics: Topics,
        db_url: str,
        systems: SystemsProcess,
        timeout_s: float = 3.0,
        **settings: str,
    ) -> None:
        self.cli, self.bootstrap, self.topics, self.db_url, self.systems = cli, bootstrap, topics, db_url, systems
        self.settings = {
            "VIGIL_ACTIONS__SYSTEMS": systems.systems(timeout_s),
            **RECONCILER,
            **settings,
        }
        self.db = Database(db_url)
        self.sent = Sent()
        self.producer = AckedProducer(bootstrap)
        self.lives: list[VigilProcess] = []
        self._daemon: Daemon | None = None

    @property
    def process(self) -> VigilProcess:
        assert self.lives, "vigil was never started"
        return self.lives[-1]

    @property
    def daemon(self) -> Daemon:
        """The helpers of tests/e2e/action_chat.py on the current life."""
        assert self._daemon is not None, "vigil was never started"
        self._daemon.process = self.process
        return self._daemon

    async def start(self, faults: str | None = None, *, wait_ready: bool = True) -> VigilProcess:
        """A new life, armed with ``faults`` (``point=what[@n]``) if given; ready when this returns."""
        armed = {"VIGIL_FAULTS": faults} if faults else {}
        process = self.cli.daemon(self.bootstrap, self.topics, self.db_url, **self.settings, **armed)
        self.lives.append(process)
        if self._daemon is None:
            self._daemon = Daemon(process, self.db, self.systems, self.bootstrap, self.topics, self.producer)  # type: ignore[arg-type]
        if wait_ready:
            await ready(process, timeout_s=START_S)
        return process

    async def dies_of_sigkill(self, point: str, timeout_s: float = DEATH_S) -> None:
        """Wait for the current life to die at its failpoint: killed by SIGKILL, nothing else."""
        process = self.process
        try:
            code = await asyncio.to_thread(process.popen.wait, timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"vigil never reached {point} within {timeout_s}s; log tail:\n{process.tail()}"
            ) from None
        assert code == -signal.SIGKILL, f"vigil exited with {code}, not killed at {point}; log:\n{process.tail()}"

    async def consuming(self, timeout_s: float = 60.0) -> None:
        """Wait until the current life has its partitions (a life that replaces a killed one waits for the dead
        member's session to lapse first): what is sent from now on is taken at once."""
        process = self.process
        await eventually("partitions assigned", lambda: "assigned partitions" in process.log(), timeout_s, process)

    def kill(self) -> None:
        """SIGKILL from outside, as an OOM killer or a node's death does it; wait until the process is gone."""
        self.process.send(signal.SIGKILL)
        assert self.process.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        """A clean stop (SIGTERM): what was done is committed, and the group is left at once."""
        self.process.stop(clean=False)

    async def send(self, events: Sequence[dict[str, Any]]) -> None:
        """Produce ``events`` in order on the input topic (noted in ``sent``)."""
        self.sent.events(events)
        await self.daemon.send(list(events))

    async def approve(self, conversation_id: str, action: dict[str, Any]) -> httpx.Response:
        """Approve ``action`` (a row of ``Daemon.actions``) of the conversation through the current life's API, as
        the local admin; an accepted approval (202) goes into ``sent``."""
        async with httpx.AsyncClient(base_url=self.process.base_url, timeout=10) as http:
            response = await http.post(
                f"/api/actions/{action['action_id']}/approve", json={"arguments_hash": action["arguments_hash"]}
            )
        if response.status_code == 202:
            self.sent.accepted.add(action["action_id"])
            self.sent.feedback.add((conversation_id, response.json()["feedback_id"]))
        return response

    async def settled(self, timeout_s: float = SETTLE_S) -> None:
        """Wait until every record sent is committed, then until no action is left ``approved``, ``executing`` or
        ``in_doubt`` (the systems answer again by now, so the reconciler settles what a fault left in doubt), or
        ``timeout_s`` passed: the reconciliation names those left."""
        await self.daemon.processed()
        with contextlib.suppress(AssertionError):
            await eventually(
                "no action stuck", lambda: not stuck_actions(self.db, doubtful=True), timeout_s, self.process
            )

    def suggestions(self) -> list[Read]:
        """Every record on the suggestions topic, read by an independent client: at least as many as vigil stored
        (a suggestion published twice must be seen twice, so reading goes on until the topic is quiet)."""
        return read_all(self.bootstrap, self.topics.suggestions, at_least=self.db.count("suggestion"))

    def close(self) -> None:
        self.producer.flush(10)


_accounts = itertools.count(1)


class Refund:
    """A customer of the test's own, one delivered order of theirs, and the conversation in which they ask for part
    of it back (``asked``), say yes (``yes``: the action then waits for an analyst's approval), hear a promise from
    the analyst (``promise``) and are done (``closed``)."""

    def __init__(self, systems: ShopFile, *, amount_cents: int = 3000, total_cents: int = 8999) -> None:
        n = next(_accounts)
        self.customer, self.order, method = f"CUS-6{n:04d}", f"ORD-6{n:04d}1", f"PM-7{n:04d}"
        systems.add_customer(self.customer, methods={method: {"kind": "card"}})
        systems.add_order(Order(self.order, self.customer, "delivered", total_cents, method))
        self.amount_cents = amount_cents
        self.chat = Chat(None, f"crash-{uuid.uuid4().hex[:10]}", self.customer)  # type: ignore[arg-type]

    @property
    def id(self) -> str:
        return self.chat.id

    def asked(self) -> list[dict[str, Any]]:
        amount = f"{self.amount_cents / 100:.2f}"
        return [
            self.chat.message("customer", f"The item in {self.order} broke, please refund £{amount}"),
            self.chat.message("analyst", "Thanks, your identity is verified."),
            self.chat.message("analyst", f"I can refund {amount} for {self.order} to your card. Shall I go ahead?"),
        ]

    def yes(self) -> list[dict[str, Any]]:
        return [self.chat.message("customer", "yes please")]

    def promise(self) -> list[dict[str, Any]]:
        return [self.chat.message("analyst", "I'll email you the refund confirmation by 5pm tomorrow.")]

    def closed(self) -> list[dict[str, Any]]:
        self.chat.n += 1
        return [{
            "type": "case", "schema_version": 1, "event_id": f"{self.id}-e{self.chat.n}", "conversation_id": self.id,
            "at": stamp(SystemClock().now()), "event": "closed",
        }]  # fmt: skip


def read_all(
    bootstrap: str,
    topic: str,
    *,
    at_least: int,
    quiet_s: float = 0.5,
    timeout_s: float = 10.0,
    partitions: int = PARTITIONS,
) -> list[Read]:
    """Every record of ``topic``'s ``partitions`` from the beginning: at least ``at_least``, then until none came for
    ``quiet_s``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reconcile", "enable.auto.commit": False,
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Read] = []
    deadline, last = time.monotonic() + timeout_s, time.monotonic()
    try:
        while time.monotonic() < deadline and (len(got) < at_least or time.monotonic() - last < quiet_s):
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            got.append(Read(msg.key(), msg.value(), dict(msg.headers() or []), msg.partition(), msg.offset()))
            last = time.monotonic()
    finally:
        consumer.close()
    return got
