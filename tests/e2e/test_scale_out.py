"""Several replicas that stay correct (issue 29): `vigil run` processes in one consumer group on Tansu, sharing
PostgreSQL, a Chroma server process and the demo's systems, each a static member under its own name as the
StatefulSet runs them. Conversations with questions, promises and refunds flow while one replica is killed with -9,
another is added, and all are restarted one after the other, the last one to freeze for longer than its session
once it is back (its partitions move on meanwhile: when it wakes, what it was writing is fenced off and left to
the new owner). Then a reconciliation (tests/e2e/reconcile.py) of what
the test sent and what the systems and the suggestions topic hold against what vigil says: every event stored once,
no suggestion published twice, every promise once, every approved refund paid once, nothing left stuck; every
question answered once; and no window of the miner run by two replicas."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chroma import ChromaServer
from tests.conftest import Topics, create_topics
from tests.e2e.action_chat import Chat, Daemon, all_committed
from tests.e2e.crashes import RECONCILER, Refund, SystemsProcess, read_all
from tests.e2e.harness import Database, VigilCli, VigilProcess, eventually, ready
from tests.e2e.reconcile import Sent, reconcile, stuck_actions
from tests.kafka_client import AckedProducer
from vigil.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

PARTITIONS = 6
KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"
QUESTIONS = (
    "When is my bill taken?",
    "I've been charged twice. What should I do?",
    "Why is my first bill higher than my monthly price?",
)
REFRESH_S = 5.0
"""How often each replica picks up knowledge changed by another (VIGIL_KNOWLEDGE__REFRESH_INTERVAL_S)."""
SESSION_S = 12.0
"""The group session: a restart under the same name shorter than this keeps the replica's partitions."""
STALL_S = 32.0
"""How long a replica freezes: longer than the session and the others' join, so its partitions have moved."""


class Replicas:
    """vigil's replicas by name, each a `vigil run` with its own data folder and the same database, Chroma server,
    systems and consumer group; what the test sent them, and who was running when."""

    def __init__(
        self, cli: VigilCli, *, bootstrap: str, topics: Topics, db_url: str, systems: SystemsProcess, chroma: str
    ) -> None:
        self.cli, self.bootstrap, self.topics, self.db_url, self.systems = cli, bootstrap, topics, db_url, systems
        self.settings = {
            "VIGIL_ACTIONS__SYSTEMS": systems.systems(3.0),
            **RECONCILER,
            "VIGIL_ANSWERS__ENABLED": "true",
            "VIGIL_KNOWLEDGE__PATHS": json.dumps([str(KNOWLEDGE / "articles"), str(KNOWLEDGE / "faqs")]),
            "VIGIL_KNOWLEDGE__CHROMA_URL": chroma,
            "VIGIL_KNOWLEDGE__REFRESH_INTERVAL_S": str(REFRESH_S),
            "VIGIL_KAFKA__SESSION_TIMEOUT_S": str(SESSION_S),
            "VIGIL_MINER__INTERVAL_S": "5",
            "VIGIL_MINER__LEASE_S": "30",
            "VIGIL_LOG_LEVEL": "INFO",
            "VIGIL_APPROVALS__SECRET": "5" * 64,  # one signing key for every replica, as the production overlay's
        }
        self.db = Database(db_url)
        self.sent = Sent()
        self.producer = AckedProducer(bootstrap)
        self.running: dict[str, VigilProcess] = {}
        self.lives: list[VigilProcess] = []

    async def start(self, name: str, faults: str = "") -> VigilProcess:
        process = self.cli.daemon(
            self.bootstrap,
            self.topics,
            self.db_url,
            VIGIL_DATA_DIR=str(self.cli.tmp_path / name),
            VIGIL_KAFKA__GROUP_INSTANCE_ID=name,
            VIGIL_KAFKA__CLIENT_ID=name,
            VIGIL_FAULTS=faults,
            **self.settings,
        )
        self.running[name] = process
        self.lives.append(process)
        await ready(process, timeout_s=180)
        return process

    def kill(self, name: str) -> None:
        """SIGKILL from outside, as an OOM killer or a node's death does it."""
        process = self.running.pop(name)
        process.send(signal.SIGKILL)
        assert process.wait(10) == -signal.SIGKILL

    async def restart(self, name: str, faults: str = "") -> float:
        """A rolling update's step: SIGTERM (a clean exit, 0), then the same name again, ready; how long it took."""
        started = time.monotonic()
        await asyncio.to_thread(self.running.pop(name).stop, signal.SIGTERM, 30.0, clean=False)
        await self.start(name, faults)
        return time.monotonic() - started

    @property
    def any(self) -> VigilProcess:
        return next(iter(self.running.values()))

    def daemon(self) -> Daemon:
        return Daemon(self.any, self.db, self.systems, self.bootstrap, self.topics, self.producer)

    async def send(self, events: list[dict[str, Any]]) -> None:
        self.sent.events(events)
        await self.daemon().send(events)

    def send_to(self, partition: int, events: list[dict[str, Any]]) -> None:
        """Produce ``events`` to one partition of the input topic (keyed by their conversation, as always)."""
        self.sent.events(events)
        for event in events:
            value = json.dumps(event).encode()
            key = event["conversation_id"].encode()
            self.producer.produce(self.topics.input, key=key, value=value, partition=partition)
        assert self.producer.flush(30) == 0, "records not delivered"

    def partitions_of(self, name: str) -> list[int]:
        """The partitions the replica ``name`` was last given, as it logged them."""
        assigned = re.findall(r"assigned partitions: \[([^\]]*)\]", self.running[name].log())
        return [int(p.rsplit("/", 1)[1]) for p in re.findall(r"'([^']+)'", assigned[-1])]

    async def approve(self, refund: Refund) -> None:
        """Approve the refund's card through whichever replica is up (the API of one, the action run by the owner
        of the conversation's partition)."""

        def waiting() -> dict[str, Any] | None:  # on no replica in particular: any may be restarting meanwhile
            cards = [
                a
                for a in self.daemon().actions(refund.id)
                if a["name"] == "refund_order" and a["status"] == "suggested" and a["rule"] == "refund_needs_approval"
            ]
            return cards[-1] if cards else None

        card = await eventually(f"the refund card of {refund.id} waiting for approval", waiting, 120)
        for _ in range(60):
            process = self.any
            try:
                async with httpx.AsyncClient(base_url=process.base_url, timeout=10) as http:
                    response = await http.post(
                        f"/api/actions/{card['action_id']}/approve", json={"arguments_hash": card["arguments_hash"]}
                    )
            except httpx.HTTPError:
                await asyncio.sleep(1.0)
                continue
            assert response.status_code == 202, response.text
            self.sent.accepted.add(card["action_id"])
            self.sent.feedback.add((refund.id, response.json()["feedback_id"]))
            return
        raise AssertionError(f"no replica took the approval of {refund.id}")

    async def answered(self, conversations: list[str], timeout_s: float = 120.0) -> None:
        """Wait until each conversation has an answer stored, whichever replica has it (or had, and died)."""

        def waiting() -> list[str]:
            rows = self.db.query("SELECT DISTINCT conversation_id FROM suggestion WHERE kind = 'answer'")
            return sorted(set(conversations) - {c for (c,) in rows})

        await eventually("every question answered", lambda: not waiting(), timeout_s, show=waiting)

    async def processed(self, timeout_s: float = 180.0) -> float:
        """Wait until the group committed the whole input topic; how long it took."""
        started = time.monotonic()

        done = lambda: all_committed(self.bootstrap, self.topics, self.producer, PARTITIONS)  # noqa: E731
        await eventually("the group committed the whole input topic", done, timeout_s)
        return time.monotonic() - started


def question(n: int) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """A customer's question, then the analyst's promise and the close: (conversation id, first part, rest)."""
    chat = Chat(None, f"q-{n}-{uuid.uuid4().hex[:6]}", None)  # type: ignore[arg-type]
    asked = [chat.message("customer", QUESTIONS[n % len(QUESTIONS)])]
    chat.n += 1
    rest = [
        chat.message("analyst", "Let me check that with billing and I'll get back to you within 2 hours."),
        {"type": "case", "schema_version": 1, "event_id": f"{chat.id}-e{chat.n}", "conversation_id": chat.id,
         "at": asked[0]["sent_at"], "event": "closed", "resolution": {"resolved_by": "human", "summary": "answered"}},
    ]  # fmt: skip
    return chat.id, asked, rest


async def a_round(replicas: Replicas, label: str, questions: int = 6, refunds: int = 2) -> list[str]:
    """Conversations of each kind, all at once: questions answered, promised and closed; refunds asked for,
    approved, promised and closed. Returns the question conversations."""
    asked = [question(n) for n in range(questions)]
    await replicas.send([e for _, first, _ in asked for e in first])
    paid = [Refund(replicas.systems) for _ in range(refunds)]
    await replicas.send([e for r in paid for e in r.asked() + r.yes()])
    await asyncio.gather(*(replicas.approve(r) for r in paid), replicas.answered([c for c, _, _ in asked]))
    # Only then the analyst's reply: an answer that comes after the analyst has written is stale, and not shown.
    await replicas.send([e for _, _, rest in asked for e in rest])
    await replicas.send([e for r in paid for e in r.promise() + r.closed()])
    print(f"{label}: {questions} questions, {refunds} refunds sent")
    return [conversation for conversation, _, _ in asked]


@pytest.fixture
async def replicas(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, pg_url: str, tmp_path: Path
) -> AsyncIterator[Replicas]:
    await create_topics(kafka.bootstrap, topics, partitions=PARTITIONS)
    chroma = ChromaServer(tmp_path)
    systems = SystemsProcess(tmp_path / "systems.sqlite", tmp_path / "systems.log").start()
    chroma.start()
    group = Replicas(vigil, bootstrap=kafka.bootstrap, topics=topics, db_url=pg_url, systems=systems, chroma=chroma.url)
    try:
        yield group
    finally:
        group.producer.flush(10)
        vigil.kill_all()
        systems.stop()
        chroma.close()


async def test_replicas_killed_added_and_restarted_in_turn_lose_nothing_and_do_nothing_twice(replicas: Replicas):
    for name in ("vigil-0", "vigil-1", "vigil-2"):
        await replicas.start(name)
    questions = await a_round(replicas, "three replicas")
    await replicas.processed()

    # One is killed while conversations are in flight; its partitions move once its session lapses.
    sending = asyncio.create_task(a_round(replicas, "while one is killed"))
    await asyncio.sleep(0.2)  # its first records on their way
    replicas.kill("vigil-1")
    killed_at = time.monotonic()
    questions += await sending
    await replicas.processed()
    resumed_s = time.monotonic() - killed_at

    # Another is added, then every replica is restarted in turn (SIGTERM, exit 0, back under its name). The last one
    # back freezes on its first answer for longer than its session: the group gives its partitions to the others
    # meanwhile, and when it wakes it goes on where it stood, with a record another replica now owns.
    await replicas.start("vigil-3")
    sending = asyncio.create_task(a_round(replicas, "during a rolling restart", questions=9, refunds=3))
    restarts = [await replicas.restart(name) for name in ("vigil-0", "vigil-2")]
    restarts.append(await replicas.restart("vigil-3", faults=f"skill.after:answers=stall:{STALL_S:g}"))
    frozen = [question(n) for n in range(3)]  # on its partition, so that it has an answer to freeze on
    replicas.send_to(replicas.partitions_of("vigil-3")[0], [e for _, first, _ in frozen for e in first])
    questions += await sending
    questions += [c for c, _, _ in frozen]
    await eventually(
        "the frozen replica's answer left to the new owner of its partition",
        lambda: "to the new owner of its partition (fenced)" in replicas.running["vigil-3"].log(),
        STALL_S + 60,
    )
    await replicas.processed()
    with contextlib.suppress(AssertionError):
        await eventually("no action stuck", lambda: not stuck_actions(replicas.db, doubtful=True), 30, replicas.any)
    print(f"the killed replica's conversations all done {resumed_s:.1f} s after the kill; restarts: {restarts}")

    stored = replicas.db.count("suggestion")
    suggestions = read_all(replicas.bootstrap, replicas.topics.suggestions, at_least=stored, partitions=PARTITIONS)
    outcome = reconcile(replicas.db, replicas.systems, suggestions, replicas.sent)
    print(json.dumps(outcome.as_json()["counts"]))
    assert not outcome.problems, outcome.problems

    # Every question answered, once: one answer suggestion stored for each, whichever replica had it.
    answers = Counter(c for (c,) in replicas.db.query("SELECT conversation_id FROM suggestion WHERE kind = 'answer'"))
    assert {c: answers[c] for c in questions} == dict.fromkeys(questions, 1)
    assert all(p.popen.poll() is None for p in replicas.running.values())
    assert not [p.args for p in replicas.lives if "Traceback" in p.log() and p.popen.returncode != -signal.SIGKILL]
    assert_miner_windows_ran_once(replicas.lives)

    # A lead retires, through one replica, the FAQ that answered the first question: within the knowledge refresh's
    # interval (and a rebuild), no replica answers from it any more.
    faq = first_source_of(replicas, questions[0])
    async with httpx.AsyncClient(base_url=replicas.running["vigil-0"].base_url, timeout=10) as http:
        assert (await http.post(f"/api/knowledge/{faq}/retire")).status_code == 200
    await asyncio.sleep(REFRESH_S + 3)
    asked = [question(0) for _ in range(12)]  # over every partition, so every replica answers some
    await replicas.send([e for _, first, _ in asked for e in first])
    await replicas.processed()
    again = [c for c, _, _ in asked]
    answered = {c: first_source_of(replicas, c) for c in again}
    assert faq not in answered.values(), answered


def first_source_of(replicas: Replicas, conversation_id: str) -> str | None:
    """The entry the conversation's answer was drawn from, if it has an answer."""
    rows = replicas.db.query(
        "SELECT sources FROM suggestion WHERE conversation_id = ? AND kind = 'answer'", conversation_id
    )
    for (sources,) in rows:
        cited = json.loads(sources) if isinstance(sources, str) else sources
        if cited:
            return str(cited[0]["id"])
    return None


def assert_miner_windows_ran_once(lives: list[VigilProcess]) -> None:
    """No window of the miner ran to its end on two replicas (the miner logs each window it ran)."""
    ran: Counter[str] = Counter()
    for process in lives:
        ran.update(re.findall(r"miner, window (\S+):", process.log()))
    assert ran, "the miner never ran"
    assert [w for w, n in ran.items() if n > 1] == []
